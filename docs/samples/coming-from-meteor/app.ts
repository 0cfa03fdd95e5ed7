// A Meteor app's server code, moved over: the same methods and publications, registered on `server`.
// Meteor:  Meteor.methods({ ... }); Meteor.publish('name', fn); new Mongo.Collection('links')
import { Collection, check, type PerseidServer } from 'perseid';

export const Links = new Collection<{ _id: string; title: string; url: string; createdAt: Date; owner: string | null }>('links');

export default function app(server: PerseidServer): void {
  server.methods({
    async 'links.insert'(title: unknown, url: unknown) {
      check(title, String); // as in Meteor: a mismatch reaches the client as 400 "Match failed"
      check(url, String);
      return Links.insertAsync({ title, url, createdAt: new Date(), owner: this.userId });
    },
  });
  server.publish('links', function () {
    return Links.find({}, { sort: { createdAt: -1 } });
  });
  server.onConnection((connection) => connection.onClose(() => undefined)); // Meteor.onConnection
}
