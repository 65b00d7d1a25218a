import { Type } from '@mikro-orm/core';
import { EMBEDDING_DIMENSIONS } from './catalogue.ts';

/** A pgvector column of EMBEDDING_DIMENSIONS numbers: `p.type(VectorType)`. pgvector's text form, `[1,2,3]`, is JSON. */
export class VectorType extends Type<number[], string> {
  override convertToDatabaseValue(value: number[] | string): string {
    return typeof value === 'string' ? value : vectorLiteral(value);
  }

  override convertToJSValue(value: number[] | string): number[] {
    return typeof value === 'string' ? (JSON.parse(value) as number[]) : value;
  }

  override getColumnType(): string {
    return `vector(${EMBEDDING_DIMENSIONS})`;
  }
}

/** The text pgvector reads as a vector, for `?::vector` in raw SQL. */
export const vectorLiteral = (vector: readonly number[]): string => `[${vector.join(',')}]`;
