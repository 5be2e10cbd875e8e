-- An abandoned attempt (its worker died, lost the run or handed it back) now has an outcome:
-- `error`, or `stopped` for a hand-back. Attempts abandoned before had none; which of the two
-- they were is not recorded, so they become `error`. Statistics count no abandoned attempt.
UPDATE `iterations` SET `outcome` = 'error' WHERE `status` = 'abandoned' AND `outcome` IS NULL;
