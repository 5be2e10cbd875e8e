import { describe, expect, it } from "vitest";
import { TailBuffer } from "../src/process/tail-buffer";
import { capHead as capText } from "../src/util/cut-marks";
import { collectSecrets, REDACTED, Redactor } from "../src/util/redactor";

describe("Redactor", () => {
  const r = new Redactor(["the-api-token-value", "mistral-key-abcdef", undefined, "abc"]);

  it("replaces configured secret values wherever they appear", () => {
    expect(r.text("token=the-api-token-value and again the-api-token-value")).not.toContain(
      "the-api-token-value",
    );
    expect(r.text("key mistral-key-abcdef!")).toBe(`key ${REDACTED}!`);
    // Too short to be a secret: left alone.
    expect(r.text("abc")).toBe("abc");
  });

  it.each([
    "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "AKIAABCDEFGHIJKLMNOP",
    "xoxb-123456789012-abcdefghij",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----",
    "pk-ant-abcdefghijklmnopqrstuvwxyz012345",
    "github_pat_abcdefghijklmnopqrstuvwxyz0123456789",
    "AIzaSyAbcdefghijklmnopqrstuvwxyz0123456",
  ])("redacts the common key pattern %s", (secret) => {
    expect(r.text(`before ${secret} after`)).toBe(`before ${REDACTED} after`);
  });

  it("keeps the name of an assignment and the Bearer scheme", () => {
    expect(r.text("OPENAI_API_KEY=abcdefgh12345678")).toBe(`OPENAI_API_KEY=${REDACTED}`);
    expect(r.text("Authorization: Bearer abcdefghijklmnop123456")).toBe(
      `Authorization: Bearer ${REDACTED}`,
    );
    expect(r.text('password: "hunter2hunter2"')).toBe(`password: "${REDACTED}"`);
    expect(r.text("export MY_SECRET=abcdefgh12345678")).toBe(`export MY_SECRET=${REDACTED}`);
    expect(r.text("x-apikey: abcdefgh12345678")).toBe(`x-apikey: ${REDACTED}`);
    expect(r.text("db PASSWD=abcdefgh12345678")).toBe(`db PASSWD=${REDACTED}`);
    expect(r.text("connect postgres://u:pw@db/x")).toBe(`connect postgres://u:${REDACTED}@db/x`);
  });

  it("redacts a secret a terminal shows whole though an escape cuts its bytes", () => {
    const r = new Redactor(["tok-audit-123"]);
    // Coloured output keeps its escapes where no secret hides in them.
    expect(r.text("\x1b[32mok\x1b[0m tok-audit-123\n")).toBe(`\x1b[32mok\x1b[0m ${REDACTED}\n`);
    expect(r.text("\x1b[32mok\x1b[0m\n")).toBe("\x1b[32mok\x1b[0m\n");
    // Cut by an escape, or by a control byte: kept as shown, redacted.
    expect(r.text("say tok-\x1b[0maudit-123 now\n")).toBe(`say ${REDACTED} now\n`);
    expect(r.text("tok-audit\u0000-123")).toBe(REDACTED);
    // Overwritten by a carriage return, it is not shown; its bytes are still redacted.
    expect(r.text("tok-audit-123\rdone")).toBe(`${REDACTED}\rdone`);
  });

  it("leaves ordinary text alone", () => {
    const text = "npm test\n  3 passed, 1 failed\nexpected 4 to be 5 (src/cart.ts:12)";
    expect(r.text(text)).toBe(text);
  });

  it("redacts deep inside objects and arrays", () => {
    expect(r.deep({ a: ["x the-api-token-value"], b: { c: 1, d: "mistral-key-abcdef" } })).toEqual({
      a: [`x ${REDACTED}`],
      b: { c: 1, d: REDACTED },
    });
  });
});

describe("Redactor on capped text", () => {
  const secret = "abcdefghijklmnopqrstuvwxyz0123456789ABCD";
  const r = new Redactor([secret]);

  it("redacts the end of a secret that an output's tail begins with, after the omission line", () => {
    const tail = new TailBuffer(1024);
    tail.write(Buffer.from(`${"x".repeat(2000)}KEY=${secret}`));
    tail.write(Buffer.from(`\n${"y".repeat(1024 - 20 - 1)}`));
    const text = tail.toString();
    // The cap cut the secret: its last 20 characters open the kept tail.
    expect(text).toContain("omitted …]\nuvwxyz0123456789ABCD\ny");
    const redacted = r.text(text);
    expect(redacted).toContain(`omitted …]\n${REDACTED}\ny`);
    expect(redacted).not.toContain("uvwxyz0123");
  });

  it("redacts the start of a secret that a capped head ends with, before the line saying so", () => {
    const head = capText(`error: token ${secret} and more`, 30);
    expect(head).toMatch(/^error: token abcdefghijklmnopq\n\[… \d+ of \d+ bytes cut …\]$/);
    expect(r.text(head)).toMatch(new RegExp(`^error: token \\${REDACTED}\\n\\[…`));
  });

  it("leaves pieces anywhere else alone: a word that a secret happens to begin with", () => {
    const wordy = new Redactor(["mistral-secret-key-0123456789"]);
    expect(wordy.text("mistral")).toBe("mistral");
    expect(wordy.text("model mistral")).toBe("model mistral");
    expect(wordy.text("0123456789 begins")).toBe("0123456789 begins");
    // At a cut, a piece shorter than six characters stays too.
    expect(r.text(capText(`ends with ${secret}`, 15))).toMatch(/^ends with abcde\n/);
  });
});

describe("Redactor on commands", () => {
  it("keeps the shell structure of a command around a redacted value", () => {
    const r = new Redactor();
    expect(
      r.text(
        "echo OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123; head -c 10 /dev/zero | tr x y",
      ),
    ).toBe(`echo OPENAI_API_KEY=${REDACTED}; head -c 10 /dev/zero | tr x y`);
    expect(r.text("GH_TOKEN=abcdefgh12345678 gh pr list")).toBe(`GH_TOKEN=${REDACTED} gh pr list`);
  });

  it("leaves a variable named in a secret's place: the command expands it when it runs", () => {
    const r = new Redactor();
    for (const command of [
      "DB_PASSWORD=$TEST_DB_PASS npm test",
      `GITHUB_TOKEN=\${GITHUB_TOKEN} gh pr list`,
      'X_TOKEN="$FOO" ./deploy',
      `psql postgres://app:\${DB_PASS}@localhost/db`,
      "psql postgres://app:$DB_PASS@localhost/db",
      `gh --token=\${GITHUB_TOKEN}`,
    ]) {
      expect(r.text(command)).toBe(command);
      expect(r.changedPaths({ command })).toEqual([]);
    }
    // A variable and more is not only a name.
    expect(r.text(`GITHUB_TOKEN=\${A}abcdefghijk`)).toBe(`GITHUB_TOKEN=${REDACTED}`);
    expect(r.changedPaths({ a: ["ok", "GH_TOKEN=abcdefgh12345678"] })).toEqual(["a.1"]);
  });
});

describe("secrets in URLs", () => {
  it("redacts the password of any URL with credentials, however short", () => {
    const r = new Redactor();
    expect(r.text("connect postgres://looprun:pw@db.internal:5432/looprun failed")).toBe(
      `connect postgres://looprun:${REDACTED}@db.internal:5432/looprun failed`,
    );
    expect(r.text("redis://:s3cr3t-pass@cache:6379/0")).toBe(`redis://:${REDACTED}@cache:6379/0`);
    expect(r.text("see https://example.com/a:b@c")).toBe("see https://example.com/a:b@c");
  });

  it("takes allowlisted variables whose names look secret: PAT as a word of the name, not in PATH", () => {
    const env = {
      GH_PAT: "gh-personal-token-1",
      PAT: "bare-personal-token",
      GITLAB_PAT_RW: "gitlab-token-123",
      PATH: "/usr/local/bin:/usr/bin",
      FILE_PATTERN: "src/**/*.ts",
      COMPAT_MODE: "strict-mode",
    };
    expect(collectSecrets(env, [], Object.keys(env)).sort()).toEqual([
      "bare-personal-token",
      "gh-personal-token-1",
      "gitlab-token-123",
    ]);
  });

  it("collects the passwords of DATABASE_URL and REDIS_URL, as written and decoded", () => {
    const secrets = collectSecrets({
      DATABASE_URL: "postgresql://app:p%40ss%2Fword-1@db:5432/looprun?sslmode=require",
      REDIS_URL: "redis://127.0.0.1:6379",
    });
    expect(secrets).toContain("p%40ss%2Fword-1");
    expect(secrets).toContain("p@ss/word-1");
    const r = new Redactor(secrets);
    // A driver's error message may carry the decoded password on its own.
    expect(r.text('password "p@ss/word-1" was refused')).toBe(`password "${REDACTED}" was refused`);
    expect(collectSecrets({ DATABASE_URL: "postgres://app@db/looprun" })).toEqual([]);
    expect(
      collectSecrets({ DATABASE_URL: "postgres://db/looprun?user=app&password=from-a-param" }),
    ).toContain("from-a-param");
    // node-postgres' client key passphrase, a parameter named as a secret is.
    expect(
      collectSecrets({ DATABASE_URL: "postgres://db/looprun?sslpassword=key-passphrase-1" }),
    ).toContain("key-passphrase-1");
  });
});
