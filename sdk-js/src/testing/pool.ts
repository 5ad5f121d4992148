/** Run `jobs` with at most `width` in flight (scenes wait on their fake server, rarely on the CPU). */
export async function pool<T>(jobs: (() => Promise<T>)[], width: number): Promise<T[]> {
  const results: T[] = new Array(jobs.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < jobs.length) {
      const i = next++;
      results[i] = await jobs[i]!();
    }
  };
  await Promise.all(Array.from({ length: width }, worker));
  return results;
}

/** `work` with console.warn silenced: every refusal is logged, and thousands of lines say nothing in a test. */
export async function quietly<T>(work: () => Promise<T>): Promise<T> {
  const warn = console.warn;
  console.warn = () => undefined;
  try {
    return await work();
  } finally {
    console.warn = warn;
  }
}
