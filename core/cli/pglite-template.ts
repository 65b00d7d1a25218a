import { pgliteTemplate } from '../db/pglite.ts';

// `npm install` and `npm ci` run this (postinstall): the template cluster every new
// embedded database is copied from is made once, at install, not on the first start.
// Where it cannot be kept, new databases run initdb instead; the install goes on.
await pgliteTemplate();
