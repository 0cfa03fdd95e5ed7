/** The fenced code blocks of a Markdown page, for the tests that check docs samples against their files. */
export interface FencedBlock {
  lang: string;
  text: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** The `<!-- sample: path -->` comment right above the fence, if any. */
  sample?: string;
}

export function parseFencedBlocks(markdown: string): FencedBlock[] {
  const lines = markdown.split('\n');
  const blocks: FencedBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && lines[i] !== '```'; i++) body.push(lines[i]!);
    const above = /^<!--\s*sample:\s*(\S+)\s*-->$/.exec(lines[start - 1] ?? '');
    blocks.push({ lang: open[1]!, text: body.join('\n') + '\n', line: start + 1, sample: above?.[1] });
  }
  return blocks;
}

/** The text of every block in `lang`. */
export function fencedBlocks(markdown: string, lang: string): string[] {
  return parseFencedBlocks(markdown)
    .filter((block) => block.lang === lang)
    .map((block) => block.text);
}
