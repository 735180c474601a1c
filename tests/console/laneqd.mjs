// laneqd.mjs: a laneqd started for the console tests, on ports the OS picks (tests/README.md,
// "Ports are bound, not probed"), with a temporary data directory and one admin token; and a
// small client of its HTTP API for what the tests do outside the page.
import {spawn} from 'node:child_process';
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';

/** A hang guard only: laneqd prints "laneqd ready" well before it. */
const start_timeout_ms = 60_000;

export class laneqd {
  /** Starts `binary` with `token` as an admin token; resolves once it prints "laneqd ready". */
  static async start(binary, token) {
    const dir = mkdtempSync(path.join(tmpdir(), 'laneq-console-'));
    const config = path.join(dir, 'laneqd.json');
    writeFileSync(config, JSON.stringify({
      data_dir: path.join(dir, 'data'), http: {port: 0}, caf: {port: 0}, sync: false,
      tokens: [{token, tenant: '*'}],
    }));
    const proc = spawn(binary, ['--config', config], {stdio: ['ignore', 'pipe', 'pipe']});
    let out = '';
    let err = '';
    proc.stderr.on('data', d => { err += d; });
    const port = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`laneqd did not start: ${out}${err}`)),
                               start_timeout_ms);
      proc.stdout.on('data', d => {
        out += d;
        const m = /^laneqd http_port=(\d+)$/m.exec(out);
        if (m && out.includes('laneqd ready\n')) {
          clearTimeout(timer);
          resolve(Number(m[1]));
        }
      });
      proc.on('exit', code => {
        clearTimeout(timer);
        reject(new Error(`laneqd exited (${code}) before it was ready: ${out}${err}`));
      });
    });
    return new laneqd(proc, dir, port, token, () => err);
  }

  constructor(proc, dir, port, token, stderr) {
    this.proc = proc;
    this.dir = dir;
    this.port = port;
    this.token = token;
    this.stderr = stderr;
    this.url = `http://127.0.0.1:${port}`;
  }

  /** One API call with the admin token: {status, doc}. */
  async call(method, path_and_query, body) {
    const res = await fetch(this.url + path_and_query, {
      method,
      headers: {'Authorization': `Bearer ${this.token}`, 'Content-Type': 'application/json'},
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return {status: res.status, doc: text ? JSON.parse(text) : {}};
  }

  /** Like `call`, but anything other than 2xx throws, naming the call and the answer. */
  async ok(method, path_and_query, body) {
    const r = await this.call(method, path_and_query, body);
    if (r.status < 200 || r.status > 299) {
      throw new Error(`${method} ${path_and_query}: ${r.status} ${JSON.stringify(r.doc)}`);
    }
    return r.doc;
  }

  /** SIGTERM, then its exit code; removes the data directory. */
  async stop() {
    if (this.proc.exitCode === null) {
      const exited = new Promise(resolve => this.proc.on('exit', code => resolve(code)));
      this.proc.kill('SIGTERM');
      this.code = await exited;
    } else {
      this.code = this.proc.exitCode;
    }
    rmSync(this.dir, {recursive: true, force: true});
    return this.code;
  }
}
