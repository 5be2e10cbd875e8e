import { isIPv4 } from "node:net";

/** 127.0.0.0/8: every address of it is this machine's (127.0.0.300 is a name, not one). */
const isIPv4Loopback = (host: string) => isIPv4(host) && host.startsWith("127.");

/**
 * Whether an address the API binds to (HOST) is a loopback one, so that only this machine can
 * connect: then no API_TOKEN is required and no rate limit is set by default (env.ts).
 */
export function isLoopbackAddress(host: string): boolean {
  return host === "localhost" || host === "::1" || isIPv4Loopback(host);
}

/**
 * Whether a request's Host names this machine by a loopback name or address (cross-site.ts):
 * `localhost` and its subdomains, 127.x.x.x, `[::1]`.
 */
export function isLoopbackName(hostname: string): boolean {
  return (
    hostname === "localhost" ||
    hostname.endsWith(".localhost") ||
    hostname === "[::1]" ||
    isIPv4Loopback(hostname)
  );
}
