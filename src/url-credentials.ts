// What a URL looks like in a message: without a user name or password (a registry or server
// URL may carry them, https://user:token@host/), and without query parameters that carry
// secrets (postgres://host/db?password=...). The CLI, the control plane and the client
// library all print URLs.

/** Query parameter names that hold secrets (password, sslpassword, access_token, api_key, secret...). */
const secretParameter = /^(?:[a-z_]*password|[a-z_]*token|[a-z_]*secret|api[_-]?key)$/i;

/** `url` with the value of every secret query parameter replaced by `***`. */
export function withoutSecretParameters(url: string): string {
  return url.replace(/([?&])([^=&#]*)=([^&#]*)/g, (whole, separator: string, name: string) => {
    let decoded = name;
    try { decoded = decodeURIComponent(name); } catch { /* judged as written */ }
    return secretParameter.test(decoded) ? `${separator}${name}=***` : whole;
  });
}

/**
 * `url` with any user name and password, and every secret query parameter's value, replaced
 * by `***`. User info is taken to run to the LAST `@`: a raw secret may hold `/` or `?` (AWS
 * secret keys are base64), so an `@` later in a path hides the host too, which only shows
 * less.
 */
export function withoutCredentials(url: string): string {
  return withoutSecretParameters(url.replace(/^([a-z][a-z0-9+.-]*:\/\/).*@/i, '$1***@'));
}
