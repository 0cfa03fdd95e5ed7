/**
 * The built-in publication of the app's version (Meteor's hot code push): the
 * server publishes one document in it, the client watches that document.
 */
export const AUTOUPDATE = { publication: 'perseid_autoupdate', collection: 'perseid_autoupdate', id: 'version' } as const;
