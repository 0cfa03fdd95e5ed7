// Collections: Meteor 3's async API, indexes, and observing a query's changes on the server.
import { Collection, type PerseidServer } from 'perseid';

interface Order {
  _id: string;
  customer: string;
  total: number;
  status: 'open' | 'paid';
}

const Orders = new Collection<Order>('orders');

export async function setup(server: PerseidServer): Promise<void> {
  await Orders.createIndexAsync({ customer: 1, status: 1 });
  // A running total kept from change events (no re-query on each write).
  let openTotal = 0;
  await Orders.find({ status: 'open' }).observeAsync({
    added: (order) => void (openTotal += order.total),
    changed: (order, previous) => void (openTotal += order.total - previous.total),
    removed: (order) => void (openTotal -= order.total),
  });

  server.methods({
    order: (customer: unknown, total: unknown) => Orders.insertAsync({ customer: String(customer), total: Number(total), status: 'open' }),
    pay: (id: unknown) => Orders.updateAsync({ _id: String(id) }, { $set: { status: 'paid' } }),
    openTotal: () => openTotal,
    biggest: (customer: unknown) => Orders.findOneAsync({ customer: String(customer) }, { sort: { total: -1 } }),
  });
}
