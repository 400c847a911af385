// mt_errors.js — post-js of vitlens-mt.js only: throws the engine's errors as JS Errors.
// In the pthreads build a failing binding parks its message (wasm/bindings.cpp, guarded) and
// returns normally, so that every C++ destructor runs; this wraps each binding that can fail so
// that the caller still gets `Error("code: message")`, as from vitlens.js. A partial result (a
// Model or Input handle) is deleted before throwing.
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
    // An overloaded binding (several arities) dispatches through this[name].overloadTable.
    if (f.overloadTable) owner[name].overloadTable = f.overloadTable;
  };
  for (const cls of [Module['Model'], Module['Input']])
    for (const name of Object.getOwnPropertyNames(cls.prototype))
      if (name !== 'constructor' && name !== 'delete' && typeof cls.prototype[name] === 'function') wrap(cls.prototype, name);
  const Model = Module['Model'];
  for (const name of ['fromBytes', 'fromSafetensors']) wrap(Model, name);
  wrap(Module, 'decodeImage');
});
