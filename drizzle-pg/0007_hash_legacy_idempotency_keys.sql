-- As SQLite's 0012: Idempotency-Keys stored as written by a version before their hashing, stored
-- as their SHA-256. The lock makes submits of running processes wait (a retry inserting the hash
-- meanwhile would make the update fail).
LOCK TABLE "idempotency_keys" IN SHARE ROW EXCLUSIVE MODE;
--> statement-breakpoint
DELETE FROM "idempotency_keys" AS "l" WHERE "l"."key" !~ '^[0-9a-f]{64}$' AND EXISTS (SELECT 1 FROM "idempotency_keys" AS "h" WHERE "h"."key" = encode(sha256(convert_to("l"."key", 'UTF8')), 'hex'));
--> statement-breakpoint
UPDATE "idempotency_keys" SET "key" = encode(sha256(convert_to("key", 'UTF8')), 'hex') WHERE "key" !~ '^[0-9a-f]{64}$';
