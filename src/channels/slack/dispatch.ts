/**
 * What Slack delivered, in palaver's terms, the same for Socket Mode and the
 * HTTP Events API. Pure: Socket Mode names the kind of each delivery (the
 * envelope's `type`), HTTP leaves it to the body's shape; both end in one
 * `Delivery` the receiver hands on (receiver.ts) after the ack.
 *
 * The ack: Slack wants every delivery acknowledged within 3 s, or it shows the
 * user an error (commands, button presses) or sends it again (events). None of
 * palaver's answers carries a payload, so the ack is always empty and always
 * sent before the delivery is handled; a url_verification challenge (HTTP
 * only) is answered with the challenge instead.
 */

export type Delivery =
  /** An Events API event (`message`, `app_mention`, ...): the receiver reads the ones it knows. */
  | { kind: "event"; event: unknown }
  /** A slash command invocation. */
  | { kind: "command"; command: Record<string, unknown> }
  /** An interactivity payload (block_actions, view_submission ...): only button presses are read. */
  | { kind: "interaction"; payload: Record<string, unknown> }
  /** HTTP only: Slack checks the request URL; answered with `challenge`, nothing handled. */
  | { kind: "challenge"; challenge: string }
  /** HTTP only: Slack checks the TLS certificate of a slash command URL; answered 200, nothing handled. */
  | { kind: "sslCheck" }
  | { kind: "ignore"; why: string };

/** A Socket Mode envelope (its `type` and `payload`) as a delivery. */
export function fromEnvelope(type: string, payload: unknown): Delivery {
  if (!isRecord(payload)) return { kind: "ignore", why: `${type} without a payload` };
  switch (type) {
    case "events_api":
      return eventOf(payload);
    case "slash_commands":
      return { kind: "command", command: payload };
    case "interactive":
      return { kind: "interaction", payload };
    default:
      return { kind: "ignore", why: `envelope type ${type}` };
  }
}

/**
 * A verified HTTP request's body (parsed: JSON, a form, or a form's `payload=` JSON) as a
 * delivery. Events and challenges are JSON with a `type`; slash commands are forms with a
 * `command`; interactions are JSON in a form's `payload` field, with a `type` of their own.
 */
export function fromHttpBody(body: unknown): Delivery {
  if (!isRecord(body)) return { kind: "ignore", why: "a body that is not an object" };
  if (body.ssl_check === "1") return { kind: "sslCheck" };
  if (body.type === "url_verification") {
    return typeof body.challenge === "string"
      ? { kind: "challenge", challenge: body.challenge }
      : { kind: "ignore", why: "url_verification without a challenge" };
  }
  if (body.type === "event_callback") return eventOf(body);
  if (typeof body.command === "string") return { kind: "command", command: body };
  if (typeof body.type === "string") return { kind: "interaction", payload: body };
  return { kind: "ignore", why: "a body of no known kind" };
}

/** What an HTTP request is answered with (the ack); Socket Mode acks with an empty payload. */
export function httpAnswer(delivery: Delivery): { status: number; json?: unknown } {
  if (delivery.kind === "challenge") return { status: 200, json: { challenge: delivery.challenge } };
  return { status: 200 };
}

function eventOf(body: Record<string, unknown>): Delivery {
  return isRecord(body.event) ? { kind: "event", event: body.event } : { kind: "ignore", why: "no event" };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
