// What a URL looks like in a message: without a user name or password (a registry or server
// URL may carry them, https://user:token@host/). The CLI and the client library both print URLs.

/** `url` with any user name and password replaced by `***`. */
export function withoutCredentials(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/@]*@/i, '$1***@');
}
