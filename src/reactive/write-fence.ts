/**
 * A method's write fence: every write made inside the method registers here, and
 * is committed once every live query it could affect has applied it. When the
 * method has returned (the fence is armed) and no write is outstanding, the fence
 * fires, and the session sends `updated` (DDP notes §1.5).
 */
export interface PendingWrite {
  /** Marks this write as applied everywhere; idempotent. */
  commit(): void;
}

const NO_WRITE: PendingWrite = { commit: () => undefined };

export class WriteFence {
  private outstanding = 0;
  private armed = false;
  private fired = false;
  private onFire: (() => void) | undefined;

  beginWrite(): PendingWrite {
    // A write started after the fence fired (un-awaited work outliving its method)
    // cannot hold back an `updated` that was already sent.
    if (this.fired) return NO_WRITE;
    this.outstanding++;
    let done = false;
    return {
      commit: () => {
        if (done) return;
        done = true;
        this.outstanding--;
        this.maybeFire();
      },
    };
  }

  /** Commits `write` when `settled` resolves, or at once when there is nothing to wait for. */
  static commitWhen(write: PendingWrite, settled: Promise<unknown> | undefined): void {
    if (settled === undefined) write.commit();
    else settled.then(write.commit, write.commit);
  }

  /** Calls `onFire` (possibly synchronously) once no write is outstanding. */
  arm(onFire: () => void): void {
    if (this.armed) throw new Error('Write fence armed twice');
    this.armed = true;
    this.onFire = onFire;
    this.maybeFire();
  }

  private maybeFire(): void {
    if (!this.armed || this.fired || this.outstanding > 0) return;
    this.fired = true;
    const fire = this.onFire;
    this.onFire = undefined;
    fire?.();
  }
}
