/**
 * A gate a fake holds its answer behind until the test opens it. It proves
 * "X does not wait for Y" by order instead of by clock: hold Y at the gate,
 * see X finish, then open it. No duration is measured, so load cannot fail it.
 *
 *   const gate = createGate();
 *   fake.setHandler(async () => { await gate.opened; return { content: "late" }; });
 *   await somethingThatMustNotWait();   // finishes while the fake is held
 *   gate.open();
 */
export interface Gate {
  /** Resolves once open() was called. */
  readonly opened: Promise<void>;
  readonly isOpen: boolean;
  open(): void;
}

export function createGate(): Gate {
  let release!: () => void;
  let isOpen = false;
  const opened = new Promise<void>((resolve) => (release = resolve));
  return {
    opened,
    get isOpen() {
      return isOpen;
    },
    open() {
      isOpen = true;
      release();
    },
  };
}
