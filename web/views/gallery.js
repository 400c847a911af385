// gallery.js — the test-scene gallery (models/gallery/labels.json): one thumbnail per scene,
// one Tab stop (the chosen scene), arrow keys, Home and End within it. Owns its buttons and the
// scenes' objects (class and mask file, for the views that score a map against a mask); a scene is
// opened through the files view like any other image.
import { on } from '../events.js';
import { $ } from './util.js';

const GALLERY = './models/gallery/';

export function createGalleryView(app) {
  const items = new Map(); // scene image → [{ cls, name, mask: url }]
  const prefetched = new Map(); // scene image → its fetchScene(…, true), until it is opened
  // scene image → fetchScene(image): each scene's bytes fetched once, for its thumbnail, and kept
  // for opening it (a click then waits for no request: 10–12 ms on a 2-core machine, issue 15)
  const fetched = new Map();
  const unshown = []; // [img, scene image]: thumbnails whose image is not requested yet (showThumbnails)
  let deferring = true; // until showThumbnails: new thumbnails wait in `unshown`
  on('image-changed', ({ image }) => mark(image.name));
  on('explained', showThumbnails);

  // Fills the gallery; resolves to its scenes ({ image, names }), [] when there is none.
  async function load() {
    const box = $('gallery');
    let labels;
    try {
      const res = await fetch(GALLERY + 'labels.json');
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      labels = await res.json();
    } catch (e) {
      box.textContent = `No gallery (${GALLERY}labels.json: ${e.message}). Drop or choose an image instead.`;
      return [];
    }
    const scenes = labels.scenes ?? [];
    for (const s of scenes) {
      const names = (s.items ?? []).map((it) => it.class_name ?? labels.class_names?.[it.class] ?? String(it.class));
      items.set(s.image, (s.items ?? []).map((it, k) => ({ cls: it.class, name: names[k], mask: it.mask ? GALLERY + it.mask : null })));
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'thumb';
      b.dataset.image = s.image;
      b.title = `${s.image}: ${names.join(', ')}`;
      const img = document.createElement('img');
      if (deferring) unshown.push([img, s.image]);
      else showThumbnail(img, s.image);
      img.alt = `scene ${s.index ?? ''}: ${names.join(', ')}`;
      img.width = 64;
      img.height = 64;
      b.append(img);
      b.addEventListener('click', () => open(s.image, names));
      box.append(b);
    }
    mark(null);
    box.addEventListener('keydown', onKey);
    // The page opens the first scene once the model has loaded: its bytes are fetched and
    // decoded now, while the engine starts, not after (the fetch 20–90 ms and the decode 5–50 ms
    // on the first explanation's path, issue 15).
    if (scenes.length) {
      const first = fetchScene(scenes[0].image, true);
      prefetched.set(scenes[0].image, first);
      sceneBytes(scenes[0].image, first.then(({ blob, error }) => ({ blob, error })));  // not its bitmap, which the page closes
    }
    // The first thumbnail's image now, the others' once the first explanation is drawn (their two
    // dozen requests and decodes would share a 2-core machine with it: 180–200 ms later, issue 15),
    // when app.js says none will come, or 4 s from now at the latest (an explanation that failed).
    if (unshown.length) showThumbnail(...unshown.shift());
    setTimeout(showThumbnails, 4000);
    return scenes.map((s) => ({ image: s.image, names: (s.items ?? []).map((it) => it.class_name ?? String(it.class)) }));
  }

  // Requests every thumbnail's image not requested yet, and any made later at once (app.js may
  // call this before the gallery's list has arrived).
  function showThumbnails() {
    deferring = false;
    for (const [img, image] of unshown.splice(0)) showThumbnail(img, image);
  }

  // A thumbnail shows its scene's bytes as fetched once (sceneBytes); if they could not be
  // fetched, the browser tries the file itself (and shows the alt text if it fails too).
  function showThumbnail(img, image) {
    sceneBytes(image).then(({ blob }) => {
      if (!blob) {
        img.src = GALLERY + image;
        return;
      }
      const url = URL.createObjectURL(blob);
      const done = () => URL.revokeObjectURL(url); // the image keeps what it decoded
      img.addEventListener('load', done, { once: true });
      img.addEventListener('error', done, { once: true });
      img.src = url;
    });
  }

  // A scene's fetchScene(image), made once; a failed fetch is forgotten, so that opening the
  // scene tries again.
  function sceneBytes(image, started = null) {
    let p = fetched.get(image);
    if (!p) {
      p = started ?? fetchScene(image);
      fetched.set(image, p);
      p.then(({ error }) => error && fetched.delete(image));
    }
    return p;
  }

  // A scene's bytes: { blob } or { error }; with `decode`, also { decoded }: its decode started
  // (files.js; a failure is reported when the scene is opened).
  async function fetchScene(image, decode = false) {
    try {
      const res = await fetch(GALLERY + image);
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const blob = await res.blob();
      if (!decode) return { blob };
      const decoded = app.views.files.decode(blob);
      decoded.catch(() => {});
      return { blob, decoded };
    } catch (error) {
      return { error };
    }
  }

  async function open(image, names) {
    const pending = prefetched.get(image);
    prefetched.delete(image);
    const { blob, decoded, error } = await (pending ?? sceneBytes(image));
    if (error) {
      app.showError(`Could not fetch ${image}`, error);
      return;
    }
    await app.views.files.openImage(blob, image, names, items.get(image) ?? null, decoded);
  }

  function mark(name) {
    const thumbs = [...$('gallery').querySelectorAll('.thumb')];
    const chosen = thumbs.some((b) => b.dataset.image === name);
    thumbs.forEach((b, i) => {
      b.setAttribute('aria-pressed', String(b.dataset.image === name));
      b.tabIndex = b.dataset.image === name || (!chosen && i === 0) ? 0 : -1;
    });
  }

  function onKey(event) {
    const thumbs = [...$('gallery').querySelectorAll('.thumb')];
    const i = thumbs.indexOf(document.activeElement);
    if (i < 0) return;
    const perRow = Math.max(1, Math.round($('gallery').clientWidth / thumbs[0].offsetWidth));
    const step = { ArrowLeft: -1, ArrowRight: 1, ArrowUp: -perRow, ArrowDown: perRow, Home: -i, End: thumbs.length - 1 - i }[event.key];
    if (step === undefined) return;
    event.preventDefault();
    const next = thumbs[Math.min(thumbs.length - 1, Math.max(0, i + step))];
    for (const b of thumbs) b.tabIndex = b === next ? 0 : -1;
    next.focus();
  }

  return { load, open, showThumbnails };
}
