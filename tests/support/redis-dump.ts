import { Redis } from "ioredis";

/** Every value stored under `prefix*` in Redis, as one string (to scan for secrets). */
export async function dumpRedis(url: string, prefix: string): Promise<string> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    const keys: string[] = [];
    let cursor = "0";
    do {
      const [next, batch] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== "0");
    const parts: string[] = [];
    for (const key of keys) {
      const type = await redis.type(key);
      let value: unknown;
      if (type === "string") value = await redis.get(key);
      else if (type === "hash") value = await redis.hgetall(key);
      else if (type === "list") value = await redis.lrange(key, 0, -1);
      else if (type === "set") value = await redis.smembers(key);
      else if (type === "zset") value = await redis.call("ZRANGE", key, "0", "-1", "WITHSCORES");
      else if (type === "stream") value = await redis.xrange(key, "-", "+");
      parts.push(`${key} ${JSON.stringify(value)}`);
    }
    return parts.join("\n");
  } finally {
    redis.disconnect();
  }
}
