// The token is kept for the API calls of the pages; the form post sets the page cookie.
import { clearToken, setToken } from "./api.js";

// The page again after a refused token: the token kept on submitting is not the API's.
if (document.querySelector(".login .form-error")) clearToken();

const form = document.getElementById("login-form");
form.addEventListener("submit", () => {
  setToken(document.getElementById("login-token").value);
});
