/** A load run that cannot start or go on for a reason the user can act on: said in one line, without a stack. */
export class LoadSetupError extends Error {}
