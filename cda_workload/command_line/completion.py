"""``al completion bash``: a bash completion script made from the command line's own parser
(commands, their options and each option's choices), so it cannot fall behind it. A RUN_ID
completes with the run folders of the store named by ``--store`` (default ``al_store``),
listed by the shell: no process starts on a Tab."""

from __future__ import annotations

import argparse
import shlex

_FILES = ("--store", "--mlflow-dir", "-o", "--output", "--json-out")
_RUN_IDS = "RUN_ID"


def bash_script(parser: argparse.ArgumentParser) -> str:
    commands = _commands(parser)
    cases = []
    for name, sub in commands.items():
        options = [o for a in sub._actions for o in a.option_strings]
        choices = {
            o: " ".join(map(str, a.choices)) for a in sub._actions if a.choices for o in a.option_strings
        }
        positional = [a.metavar or a.dest for a in sub._actions if not a.option_strings]
        what = "runs" if _RUN_IDS in positional else "files" if positional else "none"
        choice_cases = "".join(f"            {o}) words={shlex.quote(c)} ;;\n" for o, c in choices.items())
        cases.append(
            f"        {name})\n"
            f"            options={shlex.quote(' '.join(options))}; positional={what}\n"
            f"            case \"$prev\" in\n{choice_cases}            esac ;;\n"
        )
    return _TEMPLATE.format(
        commands=shlex.quote(" ".join(commands)),
        files="|".join(_FILES),
        cases="".join(cases),
    )


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


_TEMPLATE = """\
# bash completion for al (from `al completion bash`); e.g. in ~/.bashrc:
#   eval "$(al completion bash)"
_al() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W {commands}" --help --version" -- "$cur"))
        return
    fi
    local options="" positional=none words=""
    case "${{COMP_WORDS[1]}}" in
{cases}    esac
    case "$prev" in
        {files}) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    esac
    if [[ -n "$words" ]]; then
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
    elif [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$options" -- "$cur"))
    elif [[ $positional == runs ]]; then
        local store=al_store i
        for ((i = 1; i < COMP_CWORD; i++)); do
            [[ "${{COMP_WORDS[i]}}" == --store ]] && store="${{COMP_WORDS[i+1]}}"
        done
        store="${{store#file:}}"
        COMPREPLY=($(compgen -W "$(command ls "$store/runs" 2>/dev/null | grep -v '^staging-')" -- "$cur"))
    elif [[ $positional == files ]]; then
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}}
complete -F _al al
"""
