/** What the storage layer counts: documents read from the database and changes received from its feeds. */
import { metrics } from '../metrics/registry.js';

export const dataMetrics = {
  databaseReads: metrics.counter('perseid_database_documents_read_total', 'Documents read from MongoDB, by anything (queries, live queries, fences)'),
  clientsReplaced: metrics.counter('perseid_database_clients_replaced_total', 'MongoDB clients replaced because they could not reach a database a new client could (a driver that did not rediscover a restarted server)'),
  changesReceived: metrics.counter('perseid_changes_received_total', 'Document changes received from the change source (database feed, workers\' primary, or fan-out bus)'),
};
