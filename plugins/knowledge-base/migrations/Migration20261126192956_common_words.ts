import { Migration } from 'rpc-service/plugin';

export class Migration20261126192956_common_words extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "knowledge_base_common_word" ("subscription_id" uuid not null, "source" text not null, "lexeme" text not null, "chunks" int not null, "counted_at" timestamptz not null, constraint "knowledge_base_common_word_pkey" primary key ("subscription_id", "source", "lexeme"));`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "knowledge_base_common_word" cascade;`);
  }
}
