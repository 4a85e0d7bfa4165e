// A receiver for `sluice listen`'s tests, verifying each request with the
// npm standardwebhooks library: run from a folder whose node_modules holds
// it, as `SLUICE_WEBHOOK_SECRET=whsec_… node listen-receiver.mjs`. It
// listens on a free loopback port and prints, one line each:
//   listening <port>
//   verified <webhook-id> <sha256 of the body, hex>   (answered 204)
//   refused <webhook-id> <why>                          (answered 400)
import { createHash } from "node:crypto";
import http from "node:http";
import { Webhook } from "standardwebhooks";

const wh = new Webhook(process.env.SLUICE_WEBHOOK_SECRET);
let verified = 0;
let refused = 0;

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    const body = Buffer.concat(chunks); // the raw bytes, as the signature covers them
    const id = req.headers["webhook-id"] ?? "-";
    try {
      wh.verify(body, req.headers);
    } catch (err) {
      refused++;
      console.log(`refused ${id} ${String(err.message).replaceAll("\n", " ")}`);
      res.writeHead(400).end("bad signature");
      return;
    }
    verified++;
    console.log(`verified ${id} ${createHash("sha256").update(body).digest("hex")}`);
    res.writeHead(204).end();
  });
});
server.listen(0, "127.0.0.1", () => console.log(`listening ${server.address().port}`));

process.on("SIGTERM", () => {
  console.log(`done ${verified} verified ${refused} refused`);
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
