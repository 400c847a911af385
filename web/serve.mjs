// serve.mjs — a small static server for the page, on 127.0.0.1 only, with no dependencies.
//
// One origin, three roots:  /         → web/            (the page: this file's directory)
//                           /wasm/    → the wasm build  (vitlens.js, vitlens.wasm and the pthreads
//                                       vitlens-mt.*; default build-wasm/wasm)
//                           /models/  → models/         (the shipped model and its gallery)
// A static host needs the same layout (see scripts/site.sh). By default no special headers are
// sent, as on a plain static host; --isolate adds COOP/COEP so that the page is cross-origin
// isolated, and the page's worker runs the pthreads build vitlens-mt.js.
//
//   node web/serve.mjs [--port 8080] [--wasm DIR] [--models DIR] [--isolate]
// As a module: `const server = await startServer({ port: 0 }); server.url; await server.close();`
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// The page is the directory this file sits in (so that a copy of web/ under any name serves
// itself, as bench/startup_ab.mjs and bench/switch_ab.mjs need); the defaults of the other roots
// are the checkout's around it.
const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..');

const MIME = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.svg': 'image/svg+xml',
  '.ico': 'image/x-icon',
  '.txt': 'text/plain; charset=utf-8',
  '.md': 'text/plain; charset=utf-8',
  '.vitl': 'application/octet-stream',
  '.safetensors': 'application/octet-stream',
  '.npy': 'application/octet-stream',
};

// The file a URL path names, or null when it falls outside every root.
function resolvePath(roots, urlPath) {
  let decoded;
  try {
    decoded = decodeURIComponent(urlPath);
  } catch {
    return null;
  }
  if (decoded.includes('\0')) return null;
  for (const [prefix, dir] of roots) {
    if (!decoded.startsWith(prefix)) continue;
    const rel = decoded.slice(prefix.length);
    const file = path.resolve(dir, '.' + path.posix.normalize('/' + rel));
    if (file !== dir && !file.startsWith(dir + path.sep)) return null;
    return file;
  }
  return null;
}

export function startServer({ port = 8080, host = '127.0.0.1', wasmDir, modelsDir, isolate = false, quiet = true } = {}) {
  const roots = [
    ['/wasm/', path.resolve(wasmDir || process.env.VITLENS_WASM_DIR || path.join(repo, 'build-wasm/wasm'))],
    ['/models/', path.resolve(modelsDir || path.join(repo, 'models'))],
    ['/', here],
  ];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://localhost');
    const headers = { 'Cache-Control': 'no-cache', 'X-Content-Type-Options': 'nosniff' };
    if (isolate) {
      headers['Cross-Origin-Opener-Policy'] = 'same-origin';
      headers['Cross-Origin-Embedder-Policy'] = 'require-corp';
    }
    const done = (status, body, type = 'text/plain; charset=utf-8') => {
      res.writeHead(status, { ...headers, 'Content-Type': type });
      res.end(req.method === 'HEAD' ? undefined : body);
      if (!quiet) console.log(`${status} ${req.method} ${url.pathname}`);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return done(405, 'method not allowed\n');
    let file = resolvePath(roots, url.pathname === '/' ? '/index.html' : url.pathname);
    if (!file) return done(403, 'forbidden\n');
    fs.stat(file, (err, st) => {
      if (!err && st.isDirectory()) {
        file = path.join(file, 'index.html');
        st = fs.existsSync(file) ? fs.statSync(file) : null;
      }
      if (err || !st || !st.isFile()) return done(404, `not found: ${url.pathname}\n`);
      res.writeHead(200, {
        ...headers,
        'Content-Type': MIME[path.extname(file).toLowerCase()] || 'application/octet-stream',
        'Content-Length': st.size,
      });
      if (!quiet) console.log(`200 ${req.method} ${url.pathname}`);
      if (req.method === 'HEAD') return res.end();
      fs.createReadStream(file).pipe(res);
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const { port: actual } = server.address();
      resolve({
        url: `http://${host}:${actual}/`,
        roots: Object.fromEntries(roots),
        close: () => new Promise((r) => server.close(() => r())),
      });
    });
  });
}

function parseArgs(argv) {
  const opts = { quiet: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--port') opts.port = Number(value());
    else if (a === '--wasm') opts.wasmDir = value();
    else if (a === '--models') opts.modelsDir = value();
    else if (a === '--isolate') opts.isolate = true;
    else if (a === '--quiet') opts.quiet = true;
    else throw new Error(`unknown option ${a}; usage: node web/serve.mjs [--port P] [--wasm DIR] [--models DIR] [--isolate] [--quiet]`);
  }
  return opts;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const opts = parseArgs(process.argv.slice(2));
  const server = await startServer(opts);
  for (const [prefix, dir] of Object.entries(server.roots)) {
    if (!fs.existsSync(dir)) console.warn(`warning: ${prefix} → ${dir} does not exist`);
  }
  if (!fs.existsSync(path.join(server.roots['/wasm/'], 'vitlens.js')))
    console.warn('warning: vitlens.js is not built yet: run scripts/build.sh');
  console.log(`vitlens page: ${server.url}${opts.isolate ? ' (cross-origin isolated)' : ''}  (Ctrl-C to stop)`);
}
