"""npubench's prompt-file format (docs/mlir-air.md, "Prompt files"): the one reader the HF
reference uses, with the rules verify/nb_prompts.c implements, so both sides see the same
prompts. Needs nothing beyond the standard library (no torch), so tests can import it.

Run as a script, it prints the prompts of a file as a JSON list (exit 2 on a bad file)."""

import json
import sys

PROMPT_MAX_BYTES = 65536  # NB_PROMPT_MAX_BYTES
PROMPTS_MAX = 4096  # NB_PROMPTS_MAX


class PromptFileError(ValueError):
    """A prompt file that breaks the format; the message names the file and the line."""


def parse_prompts(data, name):
    """The prompts in data (the file's bytes), in order.

    Follows mlir-air's verify runner: lines as str.splitlines() splits them, each
    str.strip()ped, blank lines and lines starting with '#' skipped. On top of that a
    leading byte-order mark is dropped and a NUL in a prompt, over-long prompts, more than PROMPTS_MAX
    prompts and a file without prompts are errors, as in C."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        # The line as the format counts lines: breaks before the bad byte, plus one.
        line = len((data[:e.start].decode("utf-8") + "x").splitlines())
        raise PromptFileError(f"{name}:{line}: invalid UTF-8 at byte offset {e.start}") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    prompts = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "\0" in line:
            raise PromptFileError(f"{name}:{number}: NUL character in a prompt")
        size = len(line.encode("utf-8"))
        if size > PROMPT_MAX_BYTES:
            raise PromptFileError(f"{name}:{number}: prompt of {size} bytes exceeds "
                                  f"{PROMPT_MAX_BYTES}")
        if len(prompts) == PROMPTS_MAX:
            raise PromptFileError(f"{name}: more than {PROMPTS_MAX} prompts")
        prompts.append(line)
    if not prompts:
        raise PromptFileError(f"{name}: no prompts (only comments or blank lines)")
    return prompts


def read_prompts(path):
    """The prompts of the file at path (see parse_prompts)."""
    with open(path, "rb") as f:
        return parse_prompts(f.read(), path)


def main(argv):
    if len(argv) != 2:
        print("usage: prompt_file.py PROMPTS_FILE", file=sys.stderr)
        return 2
    try:
        prompts = read_prompts(argv[1])
    except (OSError, PromptFileError) as e:
        print(f"prompt_file.py: {e}", file=sys.stderr)
        return 2
    print(json.dumps(prompts, ensure_ascii=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
