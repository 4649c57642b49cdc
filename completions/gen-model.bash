# bash completion for gen-model and phase0 (installed as
# share/bash-completion/completions/{gen-model,phase0}).
# The COMPREPLY=($(compgen ...)) idiom splits on purpose: completions are words (as bash-completion does it).
# shellcheck disable=SC2207

_gm_options() { # the long options a program's --help lists
    "$1" ${2:+"$2"} --help 2>/dev/null | grep -o -- '--[a-z][a-z0-9-]*' | sort -u
}

_gen_model() {
    local cur prev sub=
    _init_completion 2>/dev/null || { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; }
    # a subcommand's options are its own --help's (download and tokenize take none of the scaffold's)
    [[ ${COMP_WORDS[1]} == @(regen|preview|download|tokenize) ]] && sub=${COMP_WORDS[1]}
    case $prev in
        --out|-o|--templates|--models|-m) compopt -o dirnames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur")); return ;;
        --revision|-R|--repo|-r|--name|-n) return ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_gm_options "${COMP_WORDS[0]}" "$sub")" -- "$cur"))
    elif [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "download tokenize regen preview" -- "$cur") $(compgen -d -- "$cur"))
    elif [ "$sub" = tokenize ]; then # its TOKENIZER_JSON: a file
        COMPREPLY=($(compgen -f -- "$cur"))
    elif [ "$sub" = regen ]; then # the ids of the models in --models DIR (default models/) that have a snapshot
        local dir=models i
        for ((i = 2; i < COMP_CWORD; i++)); do
            [[ ${COMP_WORDS[i]} == --models || ${COMP_WORDS[i]} == -m ]] && dir=${COMP_WORDS[i+1]}
        done
        COMPREPLY=($(compgen -W "$(for d in "$dir"/*/snapshot; do [ -d "$d" ] && basename "${d%/snapshot}"; done)" -- "$cur"))
    else
        COMPREPLY=($(compgen -d -- "$cur"))
    fi
}

_phase0() {
    local cur prev sub=
    _init_completion 2>/dev/null || { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; }
    [[ ${COMP_WORDS[1]} == capture || ${COMP_WORDS[1]} == verify ]] && sub=${COMP_WORDS[1]}
    case $prev in
        --weights|--out|--models|--dump) COMPREPLY=($(compgen -d -- "$cur")); return ;;
        --html|--tokenizer|--md|--prompts-file) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --prompt-style) COMPREPLY=($(compgen -W "base instruct" -- "$cur")); return ;;
        --prompts) COMPREPLY=($(compgen -W "base instruct" -- "$cur") $(compgen -f -- "$cur")); return ;;
        --model) COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" --list 2>/dev/null)" -- "$cur")); return ;;
        --prompt|--tokens|--threads|--decode|--steps|--max-prompts|--ops|--rope-theta) return ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_gm_options "${COMP_WORDS[0]}" "$sub")" -- "$cur"))
    elif [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "capture verify $("${COMP_WORDS[0]}" --list 2>/dev/null)" -- "$cur"))
    elif [ "$sub" = capture ] && [ "$COMP_CWORD" -eq 2 ]; then
        COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" --list 2>/dev/null)" -- "$cur"))
    elif [ "$sub" = verify ]; then # REF and CAND: bundles, or CAND a gate file (JSON)
        COMPREPLY=($(compgen -f -- "$cur"))
    else
        COMPREPLY=($(compgen -d -- "$cur"))
    fi
}

complete -F _gen_model gen-model
complete -F _phase0 phase0
