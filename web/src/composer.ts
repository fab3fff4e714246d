/**
 * The message box: Enter sends, Shift+Enter breaks the line (and Enter while an input method is
 * composing is the method's), files are attached with the button or dropped on the page and
 * uploaded at once, so sending only waits for the uploads still running. Stop replaces nothing:
 * it shows beside Send while a turn runs, since a message may still be queued behind it.
 */
import type { Limits, UploadResult } from "../../src/channels/web/protocol.js";
import { api } from "./api.js";
import { h } from "./dom.js";
import { formatBytes } from "./format.js";

export interface ComposerElements {
  form: HTMLFormElement;
  input: HTMLTextAreaElement;
  files: HTMLInputElement;
  attach: HTMLButtonElement;
  attachments: HTMLElement;
  stop: HTMLButtonElement;
  dropZone: HTMLElement;
}

export interface ComposerOptions {
  /** Sends; resolves false when it failed (the text stays in the box). */
  send(text: string, uploads: UploadResult[]): Promise<boolean>;
  stop(): void;
  notice(text: string): void;
}

interface Attachment {
  upload: Promise<UploadResult | undefined>;
  chip: HTMLElement;
}

export class Composer {
  private attachments: Attachment[] = [];
  private limits: Limits = { messageChars: 100_000, uploadBytes: 20 * 1024 * 1024 };
  private sending = false;

  constructor(
    private readonly el: ComposerElements,
    private readonly opts: ComposerOptions,
  ) {
    el.form.addEventListener("submit", (e) => {
      e.preventDefault();
      void this.submit();
    });
    el.input.addEventListener("keydown", (e) => {
      if (e.key !== "Enter" || e.shiftKey || e.isComposing) return;
      e.preventDefault();
      void this.submit();
    });
    el.input.addEventListener("input", () => this.grow());
    el.attach.addEventListener("click", () => el.files.click());
    el.files.addEventListener("change", () => {
      this.attach(Array.from(el.files.files ?? []));
      el.files.value = "";
    });
    el.stop.addEventListener("click", () => opts.stop());
    this.dropTarget(el.dropZone);
  }

  setLimits(limits: Limits): void {
    this.limits = limits;
    this.el.input.maxLength = limits.messageChars;
  }

  setBusy(busy: boolean): void {
    this.el.stop.hidden = !busy;
  }

  focus(): void {
    this.el.input.focus();
  }

  private async submit(): Promise<void> {
    if (this.sending) return;
    const text = this.el.input.value.trim();
    if (!text && this.attachments.length === 0) return;
    this.sending = true;
    try {
      const uploads = await Promise.all(this.attachments.map((a) => a.upload));
      const done = uploads.filter((u): u is UploadResult => u !== undefined);
      if (done.length < uploads.length) {
        this.opts.notice("A file could not be uploaded: remove it or attach it again.");
        return;
      }
      const taken = this.attachments;
      this.attachments = [];
      this.el.attachments.replaceChildren();
      const savedText = this.el.input.value;
      this.el.input.value = "";
      this.grow();
      if (!(await this.opts.send(text, done))) {
        // Nothing is lost: the text and files come back for another try.
        this.el.input.value = savedText;
        this.grow();
        this.attachments = taken;
        this.el.attachments.append(...taken.map((a) => a.chip));
      }
    } finally {
      this.sending = false;
    }
  }

  private attach(files: File[]): void {
    for (const file of files) {
      if (file.size > this.limits.uploadBytes) {
        this.opts.notice(
          `${file.name} is too large (${formatBytes(file.size)}; at most ${formatBytes(this.limits.uploadBytes)}).`,
        );
        continue;
      }
      const status = h("span", { class: "status" }, "uploading…");
      const remove = h(
        "button",
        { type: "button", class: "remove", "aria-label": `Remove ${file.name}` },
        "×",
      );
      const chip = h("li", { class: "chip" }, h("span", { class: "name" }, file.name), status, remove);
      const upload = api.upload(file).then(
        (result) => {
          status.textContent = formatBytes(result.bytes);
          return result;
        },
        (err: unknown) => {
          chip.classList.add("failed");
          status.textContent = "upload failed";
          this.opts.notice(`${file.name}: ${err instanceof Error ? err.message : String(err)}`);
          return undefined;
        },
      );
      const attachment: Attachment = { upload, chip };
      remove.addEventListener("click", () => {
        this.attachments = this.attachments.filter((a) => a !== attachment);
        chip.remove();
        this.el.input.focus();
      });
      this.attachments.push(attachment);
      this.el.attachments.append(chip);
    }
  }

  private dropTarget(zone: HTMLElement): void {
    const hasFiles = (e: DragEvent) => Array.from(e.dataTransfer?.types ?? []).includes("Files");
    zone.addEventListener("dragover", (e) => {
      if (!hasFiles(e)) return;
      e.preventDefault();
      zone.classList.add("dragging");
    });
    zone.addEventListener("dragleave", (e) => {
      if (e.target === zone) zone.classList.remove("dragging");
    });
    zone.addEventListener("drop", (e) => {
      zone.classList.remove("dragging");
      if (!hasFiles(e)) return;
      e.preventDefault();
      this.attach(Array.from(e.dataTransfer?.files ?? []));
    });
  }

  /** The box grows with its text up to a third of the window, then scrolls. */
  private grow(): void {
    const input = this.el.input;
    input.style.height = "auto";
    input.style.height = `${Math.min(input.scrollHeight, window.innerHeight / 3)}px`;
  }
}
