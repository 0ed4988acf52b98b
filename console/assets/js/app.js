// The console's shell: sign-in, the tabs (hash routes) and the page
// lifecycle. Each page module exports mount(el) returning an unmount
// function.
import { api, session, whenUnauthorized, APIError } from './api.js';
import { $, clear } from './dom.js';
import { destroyAll } from './charts.js';
import * as overview from './overview.js';
import * as users from './users.js';
import * as active from './active.js';
import * as counters from './counters.js';
import * as deadLetters from './deadletters.js';
import * as audit from './audit.js';
import * as history from './history.js';

const pages = { overview, active, users, counters, 'dead-letters': deadLetters, audit, history };
let unmount = null;

function showSignin(message) {
  if (unmount) { unmount(); unmount = null; }
  destroyAll();
  session.clear();
  $('#app').hidden = true;
  $('#signin').hidden = false;
  const err = $('#signin-error');
  err.hidden = !message;
  err.textContent = message || '';
  $('#signin-token').value = '';
  $('#signin-token').focus();
}

async function signIn(token) {
  const who = await api('/v1/whoami', { token });
  session.set(token);
  session.scopes = who.scopes;
  if (!session.can('read')) {
    showSignin('This token has no read scope: the console needs a read or admin token.');
    return;
  }
  $('#signin').hidden = true;
  $('#app').hidden = false;
  const badge = $('#scope-badge');
  badge.textContent = session.can('admin') ? 'admin' : 'read only';
  badge.className = session.can('admin') ? 'badge badge-admin' : 'badge';
  route();
}

function route() {
  if ($('#app').hidden) return;
  const name = location.hash.replace(/^#\//, '') || 'overview';
  const page = pages[name] ? name : 'overview';
  for (const a of document.querySelectorAll('#tabs a')) a.classList.toggle('active', a.dataset.page === page);
  if (unmount) unmount();
  destroyAll();
  const el = clear($('#page'));
  el.dataset.page = page;
  unmount = pages[page].mount(el) || null;
}

whenUnauthorized(() => showSignin('The token was refused: sign in again.'));

$('#signin-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const token = $('#signin-token').value.trim();
  try {
    await signIn(token);
  } catch (err) {
    showSignin(err instanceof APIError && err.status === 401 ? 'Unknown token.' : `Sign-in failed: ${err.message}`);
  }
});
$('#signout').addEventListener('click', () => showSignin(''));
window.addEventListener('hashchange', route);

const saved = session.token();
if (saved) {
  signIn(saved).catch(() => showSignin('The saved token was refused: sign in again.'));
} else {
  showSignin('');
}
