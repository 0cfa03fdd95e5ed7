/**
 * MongoDB's limit on a document's size, kept by the embedded store too: a
 * document over it would be stored here and refused once the app moved to
 * MongoDB. Measured as the driver would send it (bson-shape.ts).
 */
import { calculateObjectSize, ObjectId } from 'bson';
import { EJSON } from '../../ddp/ejson.js';
import type { Document } from '../types.js';
import { toBsonShape, type BsonClasses } from '../bson-shape.js';

/** MongoDB's BSONObjMaxUserSize: 16 MiB. */
export const MAX_DOCUMENT_BYTES = 16 * 1024 * 1024;

// bson measures a Uint8Array as Binary: no copy needed for that.
const MEASURED: BsonClasses = { objectId: (hex) => ObjectId.createFromHexString(hex), binary: (bytes) => bytes };

export function assertDocumentSize(doc: Document): void {
  const bytes = calculateObjectSize(toBsonShape(doc, MEASURED) as Document);
  if (bytes > MAX_DOCUMENT_BYTES) {
    throw new Error(
      `Document ${EJSON.stringify(doc._id)} would be ${bytes} bytes as BSON, over MongoDB's limit of ${MAX_DOCUMENT_BYTES} (16 MiB): keep large data in several documents`,
    );
  }
}
