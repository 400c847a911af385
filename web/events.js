// events.js — the page's event bus: one EventTarget through which the views hear about changes
// they did not make. No framework; listeners run synchronously, in the order they were added.
//
//   model-changed      { info, reloaded }  a model was loaded: another one (each view drops what
//                                       belonged to the previous model: classes, blocks, heads,
//                                       tokens), or with `reloaded` the same one in a new worker
//   image-changed      { image }        a new image was opened (not an edit of the current one)
//   predicted          { predictions, view, aspect }   the current image was classified (also after
//                                       edits), at app.inputInfo's size; aspect: [h, w], the engine's
//                                       input size for it at its own aspect
//   method-changed     { name }         the main view's method was chosen
//   options-changed    {}               an option of the current method changed
//   explained          { explanation }  the main view drew a new explanation
//   query-changed      { query }        the query token changed (an index into the model's tokens: tokens.js)
//   explains-cancelled {}               every explain in flight was cancelled (new image or class)
//   stopped            {}               the user pressed Stop: every request was cancelled
//   priority-request   { rank }         a request was sent with priority (app.call): background
//                                       requests of a lower rank in flight are withdrawn for it
//                                       (background.js; a view's own requests rank Infinity)

export const events = new EventTarget();

export function emit(type, detail = {}) {
  events.dispatchEvent(new CustomEvent(type, { detail }));
}

export function on(type, listener) {
  events.addEventListener(type, (e) => listener(e.detail));
}
