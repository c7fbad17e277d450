// The server clock. Tests and the vector runner replace this global to inject `now`.
function pcmailNow_() {
  return Date.now();
}
