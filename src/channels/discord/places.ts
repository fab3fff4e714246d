/**
 * What the adapter knows about Discord channels: their type (does it take
 * messages? is it a thread, and of which channel?). The gateway announces
 * server channels and threads (GUILD_CREATE, THREAD_CREATE ...) and DMs show
 * up with their messages; a channel not heard of is asked from the API once.
 * This is the little of discord.js's channel cache the adapter needs.
 */
import type { APIChannel } from "@discordjs/core";
import { BoundedMap } from "../../util/bounded-map.js";
import { threadParentOf } from "./views.js";

export interface Place {
  type: number;
  /** The parent channel of a thread, else null. */
  threadParentId: string | null;
}

type ChannelLike = Pick<APIChannel, "id" | "type"> & { parent_id?: string | null };

const MAX_PLACES = 10_000;

export class Places {
  private readonly known = new BoundedMap<string, Place>(MAX_PLACES);

  constructor(private readonly fetchChannel: (id: string) => Promise<ChannelLike>) {}

  /** A channel the gateway (or an interaction) showed. */
  learn(channel: ChannelLike): Place {
    const place = { type: channel.type, threadParentId: threadParentOf(channel) };
    this.known.set(channel.id, place);
    return place;
  }

  /** A channel or thread the gateway said is gone. */
  forget(id: string): void {
    this.known.delete(id);
  }

  peek(id: string): Place | undefined {
    return this.known.get(id);
  }

  /** The channel as known, else asked from the API (its errors go to the caller). */
  async get(id: string): Promise<Place> {
    return this.known.get(id) ?? this.learn(await this.fetchChannel(id));
  }
}
