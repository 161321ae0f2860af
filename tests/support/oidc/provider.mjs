// A real OpenID Provider (panva/oidc-provider) for the appliance's sign-in tests.
//
// Started by tests/support/oidc_provider.py as `node provider.mjs CONFIG.json` from the folder
// the packages are installed in (.cache/oidc-node, by scripts/directory_test_servers.sh).
// It listens on loopback only, prints one JSON line {"issuer", "port"} once it serves, and exits
// when its stdin closes (the test process is gone) or on SIGTERM.
//
// What it adds to oidc-provider:
//   * its own sign-in page at /interaction/:uid that checks the password against the accounts
//     (a form with `login` and `password`, for a browser and for a plain HTTP client alike);
//     consent is granted at once (the appliance is a first-party client)
//   * redirect URIs: the registered ones plus glob patterns (`*` matches within one URL part,
//     e.g. http://127.0.0.1:*/oidc/callback)
//   * /__admin/* (JSON, needs the X-Admin-Token header): accounts (groups, disabled, ...),
//     extra redirect URIs, the private keys, signing any JWT, and tampering with the ID token of
//     the next token responses
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import * as http from 'node:http';
import { join } from 'node:path';
import { randomBytes, timingSafeEqual } from 'node:crypto';

import Provider, { interactionPolicy } from 'oidc-provider';
import * as jose from 'jose';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));

// ---- keys: the provider's RS256 key and a foreign one (for forged tokens), kept across restarts
async function loadKeys() {
  const file = join(config.state_dir, 'keys.json');
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8'));
  const make = async (kid) => {
    const { privateKey } = await jose.generateKeyPair('RS256', { modulusLength: 2048, extractable: true });
    return { ...(await jose.exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' };
  };
  const keys = {
    provider: await make(`provider-${randomBytes(4).toString('hex')}`),
    foreign: await make(`foreign-${randomBytes(4).toString('hex')}`),
    cookie: randomBytes(32).toString('hex'),
  };
  writeFileSync(file, JSON.stringify(keys), { mode: 0o600 });
  return keys;
}

const keys = await loadKeys();
const publicPart = ({ d, p, q, dp, dq, qi, ...pub }) => pub;

// ---- accounts: keyed by username; sub is stable and differs from the username
let accounts = {};
function resetAccounts() {
  accounts = {};
  for (const a of config.accounts) accounts[a.username] = structuredClone(a);
}
resetAccounts();
const bySub = (sub) => Object.values(accounts).find((a) => a.sub === sub);
function byLogin(login) {
  const needle = String(login ?? '').trim();
  return accounts[needle]
    || Object.values(accounts).find((a) => a.email && a.email.toLowerCase() === needle.toLowerCase());
}
function sameSecret(given, expected) {
  const a = Buffer.from(String(given ?? ''));
  const b = Buffer.from(String(expected ?? ''));
  return a.length === b.length && timingSafeEqual(a, b);
}

// ---- redirect URIs: exact ones and glob patterns
let extraRedirectUris = [];
const globToRegExp = (glob) => new RegExp(`^${glob.split('*').map(
  (part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'),
).join('[^/?#]*')}$`);
const matches = (value, exact, patterns) => exact.includes(value)
  || patterns.some((p) => globToRegExp(p).test(value));

// ---- tampering with the next token responses' ID tokens
let tamperQueue = [];
const b64 = (obj) => Buffer.from(JSON.stringify(obj)).toString('base64url');
const unb64 = (part) => JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));

async function signJwt({ payload, header = {}, signer = 'provider', original }) {
  if (signer === 'none') {
    return `${b64({ alg: 'none', typ: 'JWT', ...header })}.${b64(payload)}.`;
  }
  if (signer === 'keep') {
    // the payload changed, the signature is the original one: an invalid signature
    return `${b64({ ...unb64(original.split('.')[0]), ...header })}.${b64(payload)}.${original.split('.')[2]}`;
  }
  let key;
  let protectedHeader;
  if (signer === 'hs256') {
    // alg confusion: HMAC with the client secret instead of the provider's RSA key
    key = new TextEncoder().encode(config.client.client_secret);
    protectedHeader = { alg: 'HS256', typ: 'JWT', ...header };
  } else if (signer === 'provider' || signer === 'foreign') {
    const jwk = keys[signer];
    key = await jose.importJWK(jwk, 'RS256');
    // a foreign key claims the provider's kid unless told otherwise: a forgery
    protectedHeader = { alg: 'RS256', typ: 'JWT', kid: keys.provider.kid, ...header };
  } else {
    throw new Error(`unknown signer ${signer}`);
  }
  return new jose.CompactSign(new TextEncoder().encode(JSON.stringify(payload)))
    .setProtectedHeader(protectedHeader)
    .sign(key);
}

async function tamper(idToken, spec) {
  const payload = unb64(idToken.split('.')[1]);
  for (const [name, value] of Object.entries(spec.claims ?? {})) {
    if (value === null) delete payload[name];
    else payload[name] = value;
  }
  return signJwt({
    payload, header: spec.header ?? {}, signer: spec.signer ?? 'provider', original: idToken,
  });
}

// ---- small HTTP helpers for our own routes
async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString('utf8');
  if ((req.headers['content-type'] ?? '').includes('application/json')) {
    return text ? JSON.parse(text) : {};
  }
  return Object.fromEntries(new URLSearchParams(text));
}
const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({
  '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;',
}[c]));
const page = (title, body) => `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body><main><h1>${esc(title)}</h1>${body}</main></body></html>`;

function loginPage(uid, params, error) {
  return page('Test IdP sign-in', `
<p>Sign in to <strong>${esc(params.client_id)}</strong> (scope: ${esc(params.scope)})</p>
${error ? `<p id="error" role="alert">${esc(error)}</p>` : ''}
<form id="login-form" method="post" action="/interaction/${esc(uid)}/login" autocomplete="off">
  <label for="login">Username</label>
  <input id="login" name="login" type="text" required autofocus
         value="${esc(params.login_hint)}">
  <label for="password">Password</label>
  <input id="password" name="password" type="password" required>
  <button id="submit" type="submit">Sign in</button>
</form>
<p><a id="cancel" href="/interaction/${esc(uid)}/abort">Cancel</a></p>`);
}

// ---- the provider
const server = http.createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(config.port ?? 0, '127.0.0.1', resolve);
});
const { port } = server.address();
// 127.0.0.1 by default; `localhost` makes the provider another site than an appliance on
// 127.0.0.1 (SameSite cookies then behave as with a real, remote IdP)
const issuer = `http://${config.issuer_host ?? '127.0.0.1'}:${port}`;

const client = {
  client_id: config.client.client_id,
  client_secret: config.client.client_secret,
  redirect_uris: config.client.redirect_uris,
  post_logout_redirect_uris: config.client.post_logout_redirect_uris,
  response_types: ['code'],
  grant_types: ['authorization_code'],
  token_endpoint_auth_method: config.client.token_endpoint_auth_method,
  id_token_signed_response_alg: 'RS256',
};

// a session whose account is gone or disabled signs in again (prompt=none: login_required)
const policy = interactionPolicy.base();
policy.get('login').checks.add(new interactionPolicy.Check(
  'account_gone',
  'the signed-in account is disabled or deleted',
  'login_required',
  (ctx) => {
    const { accountId } = ctx.oidc.session;
    const account = accountId && bySub(accountId);
    return accountId && (!account || account.disabled)
      ? interactionPolicy.Check.REQUEST_PROMPT
      : interactionPolicy.Check.NO_NEED_TO_PROMPT;
  },
), 1);

const provider = new Provider(issuer, {
  clients: [client],
  jwks: { keys: [keys.provider] },
  cookies: { keys: [keys.cookie] },
  pkce: { required: () => true },
  scopes: ['openid', 'profile', 'email', 'groups'],
  claims: {
    openid: ['sub'],
    profile: ['name', 'preferred_username'],
    email: ['email', 'email_verified'],
    groups: ['groups'],
  },
  // the scope's claims go into the ID token too, not only to the userinfo endpoint
  conformIdTokenClaims: false,
  features: {
    devInteractions: { enabled: false },
    rpInitiatedLogout: {
      enabled: true,
      logoutSource(ctx, form) {
        ctx.body = page('Sign out', `${form}
<button id="logout" type="submit" form="op.logoutForm" value="yes" name="logout">Yes, sign me out</button>
<button id="stay" type="submit" form="op.logoutForm">No, stay signed in</button>`);
      },
      postLogoutSuccessSource(ctx) {
        ctx.body = page('Signed out', '<p id="signed-out">You are signed out.</p>');
      },
    },
  },
  interactions: { policy, url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  async findAccount(ctx, sub) {
    const account = bySub(sub);
    if (!account || account.disabled) {
      // a browser still signed in as them: the login prompt's account_gone check asks again
      const signingIn = ['authorization', 'resume'].includes(ctx.oidc?.route);
      return signingIn ? { accountId: sub, claims: async () => ({ sub }) } : undefined;
    }
    return {
      accountId: sub,
      async claims() {
        return {
          sub,
          preferred_username: account.username,
          name: account.name,
          email: account.email,
          email_verified: true,
          groups: [...(account.groups ?? [])],
        };
      },
    };
  },
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId
      || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    return grantId ? ctx.oidc.provider.Grant.find(grantId) : undefined;
  },
  async renderError(ctx, out) {
    ctx.type = 'html';
    ctx.body = page('Error', `<pre id="error">${esc(JSON.stringify(out, null, 2))}</pre>`);
  },
  ttl: {
    AccessToken: 3600,
    AuthorizationCode: 60,
    IdToken: 3600,
    Interaction: 600,
    Session: 3600,
    Grant: 3600,
  },
});
provider.on('server_error', (ctx, err) => console.error('server_error', err));

const exactRedirects = () => [...config.client.redirect_uris, ...extraRedirectUris];
provider.Client.prototype.redirectUriAllowed = function redirectUriAllowed(value) {
  return this.clientId === client.client_id
    ? matches(value, exactRedirects(), config.redirect_uri_patterns)
    : this.redirectUris.includes(value);
};
provider.Client.prototype.postLogoutRedirectUriAllowed = function allowed(value) {
  return this.clientId === client.client_id
    ? matches(value, this.postLogoutRedirectUris, config.post_logout_redirect_uri_patterns)
    : this.postLogoutRedirectUris.includes(value);
};

async function grantFor(details) {
  const { params, session, grantId, prompt } = details;
  const grant = grantId
    ? await provider.Grant.find(grantId)
    : new provider.Grant({ accountId: session?.accountId, clientId: params.client_id });
  if (prompt?.details?.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
  if (prompt?.details?.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
  return grant;
}

async function interactionRoutes(ctx, parts) {
  const [uid, action] = parts;
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  if (details.uid !== uid) ctx.throw(400, 'interaction mismatch');
  ctx.set('Cache-Control', 'no-store');
  const finish = async (result, merge = false) => {
    ctx.status = 303;
    ctx.redirect(await provider.interactionResult(ctx.req, ctx.res, result, {
      mergeWithLastSubmission: merge,
    }));
  };

  if (action === 'abort') {
    return finish({ error: 'access_denied', error_description: 'End-User aborted interaction' });
  }
  if (action === 'login' && ctx.method === 'POST') {
    const form = await readBody(ctx.req);
    const account = byLogin(form.login);
    let error;
    if (!account || !sameSecret(form.password, account.password)) error = 'Invalid username or password.';
    else if (account.disabled) error = 'This account is disabled.';
    if (error) {
      ctx.status = 401;
      ctx.type = 'html';
      ctx.body = loginPage(uid, { ...details.params, login_hint: form.login }, error);
      return undefined;
    }
    // sign in and grant everything asked for (first-party client): no consent page
    const grant = new provider.Grant({ accountId: account.sub, clientId: details.params.client_id });
    grant.addOIDCScope(String(details.params.scope ?? 'openid'));
    const grantId = await grant.save();
    return finish({ login: { accountId: account.sub }, consent: { grantId } });
  }
  if (action === undefined && ctx.method === 'GET') {
    if (details.prompt.name === 'login') {
      ctx.type = 'html';
      ctx.body = loginPage(uid, details.params);
      return undefined;
    }
    if (details.prompt.name === 'consent') {
      const grant = await grantFor(details);
      return finish({ consent: { grantId: await grant.save() } }, true);
    }
  }
  return ctx.throw(404, 'no such interaction route');
}

function checkAdmin(ctx) {
  if (!sameSecret(ctx.get('x-admin-token'), config.admin_token)) ctx.throw(403, 'admin token');
}

async function adminRoutes(ctx, parts) {
  checkAdmin(ctx);
  const body = ['POST', 'PUT'].includes(ctx.method) ? await readBody(ctx.req) : {};
  const [what, name] = parts;
  const route = `${ctx.method} ${what}`;
  switch (route) {
    case 'GET state':
      ctx.body = {
        issuer, accounts, extra_redirect_uris: extraRedirectUris, tamper_queue: tamperQueue,
      };
      return;
    case 'POST reset':
      resetAccounts();
      extraRedirectUris = [];
      tamperQueue = [];
      ctx.body = { ok: true };
      return;
    case 'PUT accounts': {
      const current = accounts[name];
      if (!current && !body.sub) body.sub = `sub-${name}-${randomBytes(4).toString('hex')}`;
      accounts[name] = { ...(current ?? { groups: [], disabled: false }), ...body, username: name };
      ctx.body = accounts[name];
      return;
    }
    case 'DELETE accounts':
      delete accounts[name];
      ctx.body = { ok: true };
      return;
    case 'POST redirect_uris':
      extraRedirectUris.push(body.uri);
      ctx.body = { redirect_uris: exactRedirects() };
      return;
    case 'GET keys':
      ctx.body = { provider: keys.provider, foreign: keys.foreign };
      return;
    case 'POST sign':
      ctx.body = { jwt: await signJwt(body) };
      return;
    case 'POST tamper':
      for (let i = 0; i < (body.count ?? 1); i += 1) tamperQueue.push(body);
      ctx.body = { queued: tamperQueue.length };
      return;
    default:
      ctx.throw(404, `no admin route ${route}`);
  }
}

provider.use(async (ctx, next) => {
  const parts = ctx.path.split('/').filter(Boolean);
  try {
    if (parts[0] === '__admin') return await adminRoutes(ctx, parts.slice(1));
    if (parts[0] === 'interaction') return await interactionRoutes(ctx, parts.slice(1));
  } catch (err) {
    ctx.status = err.status ?? err.statusCode ?? 500;
    ctx.type = 'text';
    ctx.body = `${err.name}: ${err.message}`;
    if (ctx.status >= 500) console.error(err);
    return undefined;
  }
  await next();
  if (ctx.oidc?.route === 'token' && ctx.status === 200 && ctx.body?.id_token && tamperQueue.length) {
    ctx.body = { ...ctx.body, id_token: await tamper(ctx.body.id_token, tamperQueue.shift()) };
  }
  return undefined;
});

server.on('request', provider.callback());
// the public JWKS, for the record (the provider serves it at /jwks)
writeFileSync(join(config.state_dir, 'jwks.json'), JSON.stringify({ keys: [publicPart(keys.provider)] }));
process.stdout.write(`${JSON.stringify({ issuer, port })}\n`);

const stop = () => {
  server.closeAllConnections();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdin.resume();
