// mt_errors.js — post-js of vitlens-mt.js only: throws the engine's errors as JS Errors.
// In the pthreads build a failing binding parks its message (wasm/bindings.cpp, guarded) and
// returns normally, so that every C++ destructor runs; this wraps each binding that can fail so
// that the caller still gets `Error("code: message")`, as from vitlens.js. A partial result (a
// Model handle) is deleted before throwing.
addOnPostRun(() => {
  const take = Module['takeError'];
  const wrap = (owner, name) => {
    const f = owner[name];
    owner[name] = function (...args) {
      const result = f.apply(this, args);
      const message = take();
      if (message) {
        if (result && typeof result.delete === 'function') result.delete();
        throw new Error(message);
      }
      return result;
    };
  };
  const Model = Module['Model'];
  for (const name of Object.getOwnPropertyNames(Model.prototype))
    if (name !== 'constructor' && typeof Model.prototype[name] === 'function') wrap(Model.prototype, name);
  for (const name of ['fromBytes', 'fromSafetensors']) wrap(Model, name);
  wrap(Module, 'decodeImage');
});
