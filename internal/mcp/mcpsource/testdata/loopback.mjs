// Preloaded (node --import) into a server that listens on a port without
// naming a host, which Node binds on every interface: the listening happens
// on 127.0.0.1 instead, so that a test's traffic stays on loopback.
import net from 'node:net';

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' || (typeof args[0] === 'string' && /^\d+$/.test(args[0]))) {
    const port = Number(args[0]);
    const rest = args.slice(1).filter((a) => typeof a === 'function');
    return listen.call(this, port, '127.0.0.1', ...rest);
  }
  if (args[0] && typeof args[0] === 'object' && args[0].host === undefined && args[0].path === undefined) {
    args[0] = { ...args[0], host: '127.0.0.1' };
  }
  return listen.apply(this, args);
};
