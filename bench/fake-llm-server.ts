/**
 * Runs the fake OpenAI server as its own process, so that in a benchmark the
 * "remote" LLM does not share the event loop of the agent being measured.
 * Arguments: the latency in ms (default 200), then optionally a JSON FakeReply
 * merged over the default answer ("hi" after the latency), e.g. a streamed one.
 * Prints its base URL on the first line of stdout; exits when stdin closes.
 */
import { FakeOpenAI, type FakeReply } from "../tests/fakes/openai-server.js";

const latencyMs = Number(process.argv[2] ?? 200);
const reply = JSON.parse(process.argv[3] ?? "{}") as FakeReply;
const fake = await FakeOpenAI.start({ handler: () => ({ content: "hi", delayMs: latencyMs, ...reply }) });
process.stdout.write(`${fake.baseURL}\n`);
process.stdin.resume();
process.stdin.on("end", () => void fake.close().then(() => process.exit(0)));
