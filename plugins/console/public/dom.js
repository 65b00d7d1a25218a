/* global document, window */
/**
 * Building the page from data: every text goes in as a text node (nothing is
 * parsed as HTML), and no element gets a style attribute (the page's CSP
 * allows styles from console.css only).
 */

const SVG_NS = 'http://www.w3.org/2000/svg';

function build(element, attributes, children) {
  for (const [name, value] of Object.entries(attributes ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on')) element.addEventListener(name.slice(2), value);
    else element.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    element.append(typeof child === 'object' ? child : String(child));
  }
  return element;
}

/** An HTML element: `h('button', {type: 'button', onclick}, 'Save')`. */
export const h = (tag, attributes, ...children) => build(document.createElement(tag), attributes, children);

/** An SVG element, for the charts. */
export const s = (tag, attributes, ...children) => build(document.createElementNS(SVG_NS, tag), attributes, children);

let lastId = 0;
/** An id for a label's `for` or an `aria-labelledby`. */
export const uid = (prefix) => `${prefix}-${++lastId}`;

/** A labelled input: the label is visible and names the control. */
export function field(label, control, hint) {
  const id = control.id || uid('field');
  control.id = id;
  const hintId = hint ? `${id}-hint` : undefined;
  if (hintId) control.setAttribute('aria-describedby', hintId);
  return h('div', { class: 'field' }, h('label', { for: id }, label), control, hint && h('p', { class: 'hint', id: hintId }, hint));
}

/** A checkbox with its visible label after it. */
export function checkbox(label, input) {
  input.id = input.id || uid('field');
  return h('div', { class: 'field checkbox' }, input, h('label', { for: input.id }, label));
}

/** A date as the reader's locale writes it, or a dash. */
export const when = (iso) => (iso ? new Date(iso).toLocaleString() : '—');

/**
 * A table with a caption and column headers; `columns` are `[header, row => text or node]`.
 * It scrolls inside its own box, so a narrow screen never scrolls the page sideways.
 */
export function table(caption, columns, rows, empty = 'Nothing yet.') {
  if (rows.length === 0) return h('p', { class: 'empty' }, `${caption}: ${empty}`);
  return h(
    'div',
    { class: 'table-wrap', tabindex: 0, role: 'region', 'aria-label': caption },
    h(
      'table',
      {},
      h('caption', {}, caption),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          columns.map(([header]) => h('th', { scope: 'col' }, header)),
        ),
      ),
      h(
        'tbody',
        {},
        rows.map((row) =>
          h(
            'tr',
            {},
            columns.map(([, cell]) => h('td', {}, cell(row) ?? '—')),
          ),
        ),
      ),
    ),
  );
}

/** A section of a page named by its heading. */
export function titled(title, ...content) {
  const headingId = uid('section');
  return h('section', { 'aria-labelledby': headingId }, h('h2', { id: headingId }, title), ...content);
}

/** A section of a page with its heading; `load` fills it, and `section(...).refresh()` (or the `refresh` load is given) fills it again. */
export function section(title, load) {
  const body = h('div', { class: 'section-body' });
  const element = titled(title, body);
  const refresh = async () => {
    body.setAttribute('aria-busy', 'true');
    try {
      body.replaceChildren(...[await load(refresh)].flat().filter((child) => child !== undefined && child !== null && child !== false));
    } catch (error) {
      body.replaceChildren(failure(error));
    } finally {
      body.removeAttribute('aria-busy');
    }
  };
  element.refresh = refresh;
  void refresh();
  return element;
}

/** What the service answered when it refused or failed: its message, and its code for the reader who reports it. */
export const failure = (error) =>
  h(
    'p',
    { class: 'error', role: 'alert' },
    error.code === 'FORBIDDEN' ? `Not allowed: ${error.message}` : `${error.message}${error.code ? ` (${error.code})` : ''}`,
  );

/**
 * A button that shows it is working while `action` runs, and the failure if
 * it fails; with `confirm` (a question), only once the reader has said yes.
 */
export function action(label, run, { confirm, ...attributes } = {}) {
  const button = h('button', { type: 'button', ...attributes }, label);
  button.addEventListener('click', async () => {
    if (confirm && !window.confirm(confirm)) return;
    button.disabled = true;
    try {
      await run(button);
    } catch (error) {
      button.after(failure(error));
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

/** A form whose submit calls `submit(values)` with its named fields; a failure is shown in the form. */
export function form(label, controls, submitLabel, submit) {
  const message = h('div', { class: 'form-message', 'aria-live': 'polite' });
  const element = h(
    'form',
    { 'aria-label': label, class: 'form' },
    controls,
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, submitLabel)),
    message,
  );
  element.addEventListener('submit', async (event) => {
    event.preventDefault();
    const button = element.querySelector('button[type=submit]');
    button.disabled = true;
    message.replaceChildren();
    try {
      const values = Object.fromEntries(
        [...element.elements].filter((input) => input.name).map((input) => [input.name, input.type === 'checkbox' ? input.checked : input.value]),
      );
      const shown = await submit(values, element);
      if (shown) message.replaceChildren(shown);
    } catch (error) {
      message.replaceChildren(failure(error));
    } finally {
      button.disabled = false;
    }
  });
  return element;
}
