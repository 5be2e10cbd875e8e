/** Runs `close` once on SIGTERM or SIGINT, then exits; a second signal exits at once. */
export function closeOnSignals(close: () => Promise<void>): void {
  let closing = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (closing) process.exit(1);
    closing = true;
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
}

export function fail(message: string): never {
  process.stderr.write(`looprun: ${message}\n`);
  process.exit(1);
}
