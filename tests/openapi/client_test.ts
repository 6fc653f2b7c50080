// Type-checked (tsc --strict --noEmit) against the types openapi-typescript generated from the
// served /openapi.json (`corral.d.ts` beside this file): the WebSocket's messages narrow on their
// `type`, a Judge0 request takes its language id as text, a Judge0 answer is a submission. A
// change to the document that breaks these typed uses fails scripts/openapi-clients.
import type { components, paths } from "./corral";

type S = components["schemas"];

export function describe(m: S["WsServerMessage"]): string {
  switch (m.type) {
    case "stdout":
    case "stderr":
      return m.data;
    case "exit":
      return `${m.status} ${m.code ?? "-"} ${m.stdout}`;
    case "error":
      return `${m.error}: ${m.message} ${m.retry_after ?? ""}`;
    case "stdin":
    case "queued":
    case "started":
      return m.type;
  }
}

export const run: S["WsClientMessage"] = {
  type: "run",
  cmd: ["python3", "-c", "print(input())"],
  tty: { cols: 80, rows: 24 },
  queue_notices: true,
};
export const input: S["WsClientMessage"] = { type: "stdin", data: "hi\n", eof: true };

export const judge0: S["Judge0SubmissionRequest"] = { source_code: "print(1)", language_id: "71" };
type Created = paths["/judge0/submissions"]["post"]["responses"][201]["content"]["application/json"];
export const created: Created = { token: "5f0c9e4f-0b8f-4a55-a3a8-a1c64b3b8d2e" };
type Batch = paths["/judge0/submissions/batch"]["post"]["responses"][201]["content"]["application/json"];
export const items: Batch = [{ token: "5f0c9e4f-0b8f-4a55-a3a8-a1c64b3b8d2e" }, { language_id: ["can't be blank"] }, { error: "queue is full" }];
export function verdict(s: S["Judge0Submission"]): string {
  return `${s.status?.id} ${s.status?.description} ${s.stdout ?? ""}`;
}
