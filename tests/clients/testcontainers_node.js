// testcontainers' toxiproxy module for Node (@testcontainers/toxiproxy),
// as test suites use it, starts an image and drives it through its own
// client: a proxy, a latency toxic seen on a real connection, the proxy
// disabled (refused) and enabled, the toxic removed. Usage: node
// testcontainers_node.js IMAGE, with DOCKER_HOST naming the engine's
// socket and NODE_PATH the node_modules that hold the module. Prints "ok"
// at the end; any failure exits non-zero.
"use strict";
const assert = require("assert");
const http = require("http");
const { ToxiProxyContainer } = require("@testcontainers/toxiproxy");

/** Milliseconds for GET /version through `host:port`, and its body. */
function version(host, port) {
  return new Promise((resolve, reject) => {
    const start = process.hrtime.bigint();
    const request = http.get({ host, port, path: "/version", agent: false, timeout: 10000 }, (response) => {
      let body = "";
      response.on("data", (data) => (body += data));
      response.on("end", () => resolve([Number(process.hrtime.bigint() - start) / 1e6, body]));
    });
    request.on("error", reject);
    request.on("timeout", () => request.destroy(new Error("no answer")));
  });
}

async function main() {
  const image = process.argv[2];
  const container = await new ToxiProxyContainer(image).start();
  try {
    // The proxy forwards to the container's own API, a real HTTP server.
    const proxy = await container.createProxy({ name: "api", upstream: "localhost:8474" });
    let [took, body] = await version(proxy.host, proxy.port);
    assert.match(body, /^\{"version": "2\./);

    await proxy.instance.addToxic({ type: "latency", stream: "downstream", toxicity: 1, attributes: { latency: 300, jitter: 0 } });
    [took] = await version(proxy.host, proxy.port);
    assert.ok(took >= 300 && took < 3000, `with 300 ms of latency: ${took} ms`);

    await proxy.setEnabled(false);
    await assert.rejects(version(proxy.host, proxy.port), "a disabled proxy serves nothing");
    await proxy.setEnabled(true);
    [took, body] = await version(proxy.host, proxy.port);
    assert.ok(took >= 300, `enabled again, with its toxic: ${took} ms`);

    await (await proxy.instance.getToxic("latency_downstream")).remove();
    [took] = await version(proxy.host, proxy.port);
    assert.ok(took < 300, `the toxic removed: ${took} ms`);
  } finally {
    await container.stop();
  }
  console.log("ok");
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
