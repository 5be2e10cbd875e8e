// The token is kept for the API calls of the pages; the form post sets the page cookie.
import { setToken } from "./api.js";

const form = document.getElementById("login-form");
form.addEventListener("submit", () => {
  setToken(document.getElementById("login-token").value);
});
