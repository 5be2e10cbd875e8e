/** @jsxRuntime automatic @jsxImportSource hono/jsx */
import { ASSETS, Layout } from "./layout";

export function LoginPage({ next, error }: { next: string; error?: string }) {
  return (
    <Layout title="Sign in" auth={false} bare>
      <section class="card login">
        <h1>Sign in</h1>
        <p class="muted">
          This looprun API has an <code>API_TOKEN</code>. Enter it once: this browser keeps it to
          call the API, and a cookie opens the dashboard pages.
        </p>
        {error ? (
          <p class="form-error" role="alert">
            {error}
          </p>
        ) : null}
        <form method="post" action="/login" id="login-form">
          <input type="hidden" name="next" value={next} />
          <label>
            API token
            <input
              type="password"
              name="token"
              id="login-token"
              autocomplete="current-password"
              required
            />
          </label>
          <button type="submit" class="primary">
            Sign in
          </button>
        </form>
      </section>
      <script type="module" src={`${ASSETS}/login.js`} />
    </Layout>
  );
}
