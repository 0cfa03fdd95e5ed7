// Methods: arguments checked, errors the client can show, the caller's connection and user.
import { Collection, DDPError, type PerseidServer } from 'perseid';

const Votes = new Collection<{ _id: string; poll: string; choice: string; voter: string }>('votes');

export function setup(server: PerseidServer): void {
  server.methods({
    // Meteor.methods({ vote(poll, choice) { ... } }), with Meteor 3's async collection calls.
    async vote(poll: unknown, choice: unknown) {
      if (typeof poll !== 'string' || typeof choice !== 'string') throw new DDPError(400, 'Match failed');
      const voter = this.userId ?? this.connection.id; // no accounts here: one vote per connection
      if (await Votes.findOneAsync({ poll, voter })) throw new DDPError('already-voted', 'You have voted in this poll');
      await Votes.insertAsync({ poll, choice, voter });
      return Votes.find({ poll, choice }).countAsync();
    },
    // A slow method that lets the connection's next messages run meanwhile.
    async report(poll: unknown) {
      this.unblock();
      const counts: Record<string, number> = {};
      await Votes.find({ poll: String(poll) }).forEachAsync((vote) => void (counts[vote.choice] = (counts[vote.choice] ?? 0) + 1));
      return counts;
    },
  });
}
