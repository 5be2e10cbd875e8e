-- Idempotency-Keys a version before their hashing stored as written, stored as their SHA-256 as
-- keys are now (a retry across the upgrade found no run, and made a second one). A key sent as
-- 64 lowercase hex digits cannot be told from a hash: it stays. Where a retry after the upgrade
-- already stored the hash, the old row goes. looprun_sha256 is registered on the connection
-- that migrates (connection.ts).
DELETE FROM `idempotency_keys` WHERE (length(`key`) <> 64 OR `key` GLOB '*[^0-9a-f]*') AND EXISTS (SELECT 1 FROM `idempotency_keys` AS `h` WHERE `h`.`key` = looprun_sha256(`idempotency_keys`.`key`));
--> statement-breakpoint
UPDATE `idempotency_keys` SET `key` = looprun_sha256(`key`) WHERE length(`key`) <> 64 OR `key` GLOB '*[^0-9a-f]*';
