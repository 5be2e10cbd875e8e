const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/** The smallest ULID of millisecond `ms`: ids at or above it were created at `ms` or later. */
export function ulidFloor(ms: number): string {
  let time = "";
  for (let t = Math.max(0, Math.floor(ms)), i = 0; i < 10; i++, t = Math.floor(t / 32)) {
    time = CROCKFORD[t % 32] + time;
  }
  return `${time}${"0".repeat(16)}`;
}
