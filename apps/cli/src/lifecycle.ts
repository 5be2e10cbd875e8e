/** How a server that is starting says what closes it. */
export interface Shutdown {
  /** What closes what has started so far (each call replaces the last): a signal runs it. */
  closeWith(close: () => Promise<void>): void;
  /** A signal came: the process is closing (and exits once the close is done). */
  readonly stopping: boolean;
}

/**
 * Catches SIGTERM and SIGINT from now on, for a server about to start: a signal runs the close
 * handed to `closeWith` last, once, then exits (0, or 1 when it failed); a second one exits at
 * once. A signal while the server is still starting closes what has started by then (a managed
 * Redis, say) and exits without waiting for the rest: a start can wait for ever (a Redis that
 * does not answer). Without a handler a signal kills the process at once, leaving what it
 * started running.
 */
export function shutdownOnSignals(): Shutdown {
  let close = async () => {};
  let signalled = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) process.exit(1);
    signalled = true;
    process.stderr.write(`looprun: ${signal} received, shutting down…\n`);
    close().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`looprun: shutdown failed: ${String(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  return {
    closeWith(next) {
      close = next;
    },
    get stopping() {
      return signalled;
    },
  };
}

export function fail(message: string): never {
  process.stderr.write(`looprun: ${message}\n`);
  process.exit(1);
}
