# bash completion for steerctl(8).
#
# The commands, sub-commands and literal arguments come from steerctl itself
# (`steerctl --complete WORD...` prints what may follow WORD...), that is from its command
# table, so this file never needs editing when a command is added.

_steerctl()
{
	local cur=${COMP_WORDS[COMP_CWORD]}
	local prev=${COMP_WORDS[COMP_CWORD - 1]}
	case $prev in
	-s | --socket | --config)
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		return
		;;
	-t | --timeout)
		COMPREPLY=()
		return
		;;
	esac
	local words
	words=$("${COMP_WORDS[0]}" --complete "${COMP_WORDS[@]:1:COMP_CWORD-1}" 2>/dev/null) ||
		return
	mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
	# key= options take their value in the same word: no space after them.
	if [[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == *= ]]; then
		compopt -o nospace 2>/dev/null
	fi
}
complete -F _steerctl steerctl
