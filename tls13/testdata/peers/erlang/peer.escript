#!/usr/bin/env escript
%%! -noshell
%% An Erlang/OTP ssl peer for ztls's interop tests
%% (tls13/interop_erlang_test.go).
%%
%% Arguments are key=value pairs and the line protocol is the one in
%% ../README.md: role=client|server port=N suites=... groups=... ca= cert=
%% key= conns=N early=1 keyupdate=1. Suites are IANA names, groups OTP's
%% atoms (x25519, secp256r1, ...).
%%
%% OTP hands 0-RTT data to the application like any other data, so the
%% server reports a line that starts with "early-from-" as EARLY instead of
%% echoing it (the ztls side checks that it really came as 0-RTT data).

main(Argv) ->
    Args = maps:from_list([list_to_tuple(string:split(A, "=")) || A <- Argv, string:find(A, "=") =/= nomatch]),
    try
        {ok, _} = application:ensure_all_started(ssl),
        case maps:get("role", Args) of
            "server" -> server(Args);
            "client" -> client(Args)
        end
    catch
        C:E:St ->
            io:format("ERROR ~p:~p ~p~n", [C, E, St]),
            halt(1)
    end.

common(Args) ->
    Suites = case maps:get("suites", Args, "") of
                 "" -> [];
                 S -> [{ciphers, [ssl:str_to_suite(N) || N <- string:split(S, ",", all)]}]
             end,
    Groups = case maps:get("groups", Args, "") of
                 "" -> [];
                 G -> [{supported_groups, [list_to_atom(N) || N <- string:split(G, ",", all)]}]
             end,
    [{versions, ['tlsv1.3']}, {active, false}, {packet, line}, {mode, binary}] ++ Suites ++ Groups.

server(Args) ->
    Early = case maps:get("early", Args, "") of
                "1" -> [{early_data, enabled}, {anti_replay, '10k'}];
                _ -> []
            end,
    Opts = common(Args) ++ [{certfile, maps:get("cert", Args)}, {keyfile, maps:get("key", Args)},
                            {session_tickets, stateless}, {ip, {127, 0, 0, 1}}, {reuseaddr, true}] ++ Early,
    {ok, L} = ssl:listen(list_to_integer(maps:get("port", Args, "0")), Opts),
    {ok, {_, Port}} = ssl:sockname(L),
    io:format("LISTEN ~b~n", [Port]),
    accept(L).

accept(L) ->
    {ok, T} = ssl:transport_accept(L),
    case ssl:handshake(T, 10000) of
        {ok, S} ->
            io:format("HANDSHAKE ~s~n", [describe(S)]),
            serve_lines(S);
        {error, E} ->
            io:format("CONNERROR ~p~n", [E])
    end,
    accept(L).

describe(S) ->
    {ok, Info} = ssl:connection_information(S, [protocol, selected_cipher_suite]),
    Suite = ssl:suite_to_str(proplists:get_value(selected_cipher_suite, Info)),
    io_lib:format("suite=~s protocol=~p", [Suite, proplists:get_value(protocol, Info)]).

serve_lines(S) ->
    case ssl:recv(S, 0, 10000) of
        {ok, <<"keyupdate\n">>} ->
            ok = ssl:update_keys(S, read_write),
            ok = ssl:send(S, <<"keyupdate-done\n">>),
            io:format("KEYUPDATE sent~n"),
            serve_lines(S);
        {ok, <<"early-from-", _/binary>> = Line} ->
            io:format("EARLY ~s", [Line]),
            serve_lines(S);
        {ok, Line} ->
            ok = ssl:send(S, Line),
            serve_lines(S);
        {error, closed} ->
            ssl:close(S);
        {error, E} ->
            io:format("CONNERROR ~p~n", [E]),
            ssl:close(S)
    end.

client(Args) ->
    Port = list_to_integer(maps:get("port", Args)),
    Conns = list_to_integer(maps:get("conns", Args, "1")),
    Base = common(Args) ++ [{verify, verify_peer}, {cacertfile, maps:get("ca", Args)},
                            {server_name_indication, "localhost"}, {session_tickets, manual}],
    client_conns(Args, Base, Port, 0, Conns, none),
    io:format("DONE~n").

client_conns(_, _, _, N, N, _) ->
    ok;
client_conns(Args, Base, Port, I, N, Ticket) ->
    EarlyText = iolist_to_binary(io_lib:format("early-from-erlang-~b\n", [I])),
    Resume = case Ticket of
                 none -> [];
                 T -> [{use_ticket, [T]}] ++
                          case maps:get("early", Args, "") of
                              "1" -> [{early_data, EarlyText}];
                              _ -> []
                          end
             end,
    {ok, S} = ssl:connect({127, 0, 0, 1}, Port, Base ++ Resume, 10000),
    io:format("HANDSHAKE ~s early=~s~n", [describe(S), case lists:keymember(early_data, 1, Resume) of true -> "sent"; false -> "none" end]),
    echo(S, io_lib:format("ping-~b", [I])),
    case maps:get("keyupdate", Args, "") of
        "1" ->
            ok = ssl:update_keys(S, write),
            io:format("KEYUPDATE sent~n"),
            echo(S, io_lib:format("after-keyupdate-~b", [I]));
        _ -> ok
    end,
    %% A ticket came before the echo, if the server sent one; take the newest.
    Next = case I + 1 < N of
               true -> receive {ssl, session_ticket, T2} -> drain(T2) after 2000 -> Ticket end;
               false -> Ticket
           end,
    ssl:close(S),
    client_conns(Args, Base, Port, I + 1, N, Next).

drain(T) ->
    receive {ssl, session_ticket, T2} -> drain(T2) after 0 -> T end.

echo(S, Text) ->
    Line = iolist_to_binary([Text, "\n"]),
    ok = ssl:send(S, Line),
    case ssl:recv(S, 0, 10000) of
        {ok, Line} -> io:format("ECHO ~s", [Line]);
        Other -> error({echo, Other, Line})
    end.
