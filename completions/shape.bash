_shape() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="shape"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        shape)
            opts="-L -r -b -s -l -0 -q -i -n -p -t -e -a -N -W -f -h -V --rate --burst --size --stop-after --lines --null --quiet --progress --interval --stats --numeric --name --wait --force --rate-file --schedule --listen --exec --serve --config --serve-allow-origin --serve-allow-unix --runtime-metrics --rate-up --rate-down --per-connection --loops --connect --connect-timeout --delay --delay-up --delay-down --link --trace --trace-up --trace-down --jitter --max-buffer --slice --slice-pause --loss --drop --corrupt --cut-after --slow-close --stall-after --reset-after --duplicate --reorder --mtu --udp-idle --queue-drop --packets --jitter-keeps-order --http-status --http-header --http-delay --http-stall --http-reset --http-cut-after --grpc-status --first --every --path --method --header --during --affect --seed --remote --share --share-fallback --status --reset --pause --resume --generate --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -r)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -L)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --burst)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -b)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -s)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stop-after)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --progress)
                    COMPREPLY=($(compgen -W "auto bar json numeric none" -- "${cur}"))
                    return 0
                    ;;
                --interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -i)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -N)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --rate-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --schedule)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --exec)
                    COMPREPLY=($(compgen -c "${cur}"))
                    return 0
                    ;;
                --serve)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --serve-allow-origin)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --rate-up)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --rate-down)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --loops)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --connect)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --connect-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --delay)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --delay-up)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --delay-down)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --link)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --trace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --trace-up)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --trace-down)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --jitter)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-buffer)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --slice)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --slice-pause)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --loss)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --drop)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --corrupt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cut-after)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --slow-close)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stall-after)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --reset-after)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --duplicate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --reorder)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mtu)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --udp-idle)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --queue-drop)
                    COMPREPLY=($(compgen -W "tail head" -- "${cur}"))
                    return 0
                    ;;
                --http-status)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-header)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-delay)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-cut-after)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --grpc-status)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --first)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --every)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --method)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --header)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --during)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --affect)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --remote)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --share)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --share-fallback)
                    COMPREPLY=($(compgen -W "last block open" -- "${cur}"))
                    return 0
                    ;;
                --generate)
                    COMPREPLY=($(compgen -W "man bash zsh fish elvish powershell toxics links" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _shape -o nosort -o bashdefault -o default shape
else
    complete -F _shape -o bashdefault -o default shape
fi
