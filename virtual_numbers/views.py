from django.conf import settings
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.response import Response

from core.audio import WAV_MEDIA_TYPES
from core.errors import ApplicationError, ErrorCode
from core.passwords import hashes_passwords
from core.schema import operation, success_operation, uuid_path_parameter, wav_download_operation
from core.viewsets import JsonErrorsOnly, ResourceViewSet
from mail.links import public_base_url
from virtual_numbers import selectors, services
from virtual_numbers.responses import greeting_download, hold_music_download
from virtual_numbers.serializers import (
    AliasInput,
    BlockedCallerInput,
    BlockedCallerOutput,
    BlocklistOutput,
    ForwardingInput,
    ForwardingOutput,
    GreetingInput,
    GreetingOutput,
    HoldMusicOutput,
    HoursInput,
    HoursOutput,
    MemberInviteInput,
    MemberListOutput,
    MemberOutput,
    MemberRoleInput,
    MembershipNotificationsInput,
    NumberCreateInput,
    NumberListOutput,
    NumberOutput,
    PinChangeInput,
    RecordingInput,
    RecordingOutput,
    RingingInput,
    RingingOutput,
    SharedNumberListOutput,
    SharedNumberOutput,
)

NUMBER_EXAMPLE = {
    "id": "7c1d2e3f-4a5b-4c6d-9e8f-0a1b2c3d4e5f",
    "number": "+442079460042",
    "alias": "Office",
    "created_at": 1795320000000,
    "greeting": "",
}
GREETING_EXAMPLE = {
    "active": "recorded",
    "greeting": "You have reached the shop. Leave a message.",
    "recording_url": "/api/numbers/7c1d2e3f-4a5b-4c6d-9e8f-0a1b2c3d4e5f/greeting/recording",
    "recording_seconds": 6.48,
}
CALLER_EXAMPLE = {"caller_num": "+447700900123"}
BLOCKED_EXAMPLE = {"caller_num": "+447700900123", "created_at": 1795320000000}
FORWARDING_EXAMPLE = {
    "targets": ["+441134960456"],
    "ringSeconds": 20,
    "screening": False,
    "callerId": "caller",
}
FORWARDING_DESCRIPTION = (
    "Where calls to the number are to ring: every target at once, the first to answer "
    "taking the call, voicemail answering if none does within `ringSeconds`. The SIP agent "
    "rings the targets (docs/telephony.md, Forwarding); the simulated provider stores and "
    "checks the settings but never forwards."
)
RINGING_EXAMPLE = {
    "strategy": "in_order",
    "ringSeconds": 20,
    "screening": False,
    "callerId": "caller",
    "entries": [
        {"member": "5b2c8d1e-7f3a-4e6b-9c0d-1a2b3c4d5e6f", "ringSeconds": 15},
        {"sip": "sip:desk@pbx.example.com"},
        {"phone": "+441134960456", "ringSeconds": 30},
    ],
}
RINGING_DESCRIPTION = (
    "Who the number's calls ring, and how (its ring group): `all` rings every entry at once, "
    "the first to answer (and accept, with screening) taking the call and the others "
    "cancelled; `in_order` rings each entry for its own `ringSeconds`, then the next. "
    "Voicemail answers after the list. A member entry rings that person's console tabs with "
    "Phone on and the phone of their profile. The SIP agent rings the list (docs/telephony.md, "
    "Ring groups); the simulated provider stores and checks it but never rings. "
    "`/forwarding` is the same list seen as phones. The owner and managers read and change "
    "it: 403 `permission_denied` for a member, 404 for a number neither yours nor shared with "
    "you."
)
HOURS_EXAMPLE = {
    "timeZone": "Europe/London",
    "weekly": [{"days": ["mon", "tue", "wed", "thu", "fri"], "start": "09:00", "end": "17:30"}],
    "closedDates": ["2026-12-25"],
    "doNotDisturb": False,
    "closedGreeting": "The shop is closed. Leave a message and we will call you back.",
}
HOURS_ANSWER_EXAMPLE = {
    **HOURS_EXAMPLE,
    "closedGreetingRecordingUrl": None,
    "closedGreetingRecordingSeconds": None,
}
HOURS_DESCRIPTION = (
    "When the number takes calls. Outside its hours, on its closed dates and while "
    "`doNotDisturb` is on, its calls go straight to voicemail (with the closed greeting "
    "recorded by phone, else `closedGreeting`, if set) "
    "without ringing anyone: no forwarding, no browser, no voice application "
    "(docs/telephony.md, Opening hours). Times are local to `timeZone`, across "
    "daylight-saving changes. No hours set: always open."
)
MEMBER_EXAMPLE = {
    "id": "5b2c8d1e-7f3a-4e6b-9c0d-1a2b3c4d5e6f",
    "email": "sam@example.com",
    "role": "member",
    "status": "invited",
    "invitedAt": 1795320000000,
    "expiresAt": 1795924800000,
    "joinedAt": None,
}
SHARED_EXAMPLE = {
    "id": "7c1d2e3f-4a5b-4c6d-9e8f-0a1b2c3d4e5f",
    "number": "+442079460042",
    "alias": "Office",
    "role": "member",
    "memberId": "5b2c8d1e-7f3a-4e6b-9c0d-1a2b3c4d5e6f",
    "joinedAt": 1795330000000,
    "webhook": False,
    "matrix": False,
    "missedCallEmail": False,
    "voicemailEmail": False,
}
SHARED_NUMBER_ID_PARAMETER = uuid_path_parameter(
    "number_id", description="the shared number's `id`"
)
SHARED_NOTIFICATIONS_DESCRIPTION = (
    "Your sockets always get a shared number's `incoming_call`, `call_record` and "
    "`call_record.transcribed`. Besides them, each off until you turn it on: your webhook "
    "(`webhook`, signed as your webhook's other deliveries, for the events it takes), your "
    "Matrix room (`matrix`), the mail of a missed call (`missedCallEmail`) and of a voicemail "
    "(`voicemailEmail`; `attachAudio` of PUT /api/user/notifications says whether its WAV is "
    "attached). Give any of the switches, or none (a read). They are yours alone: the owner "
    "and managers neither see nor change them, and your account's switches "
    "(PUT /api/user/notifications) stay those of your own numbers. 404 for a number of your "
    "own, one not shared with you, or one you left."
)
MEMBER_ID_PARAMETER = uuid_path_parameter(
    "member_id", description="the member's (or invitation's) `id`"
)
MEMBERS_DESCRIPTION = (
    "A number is shared with up to 20 people (members and pending invitations together), "
    "each `member` or `manager`. The owner and managers list, invite, change and remove "
    "them; a member may only read and remove (leave) their own membership: 403 "
    "`permission_denied` for the rest. 404 for a number neither yours nor shared with you."
)


RECORDING_EXAMPLE = {
    "enabled": True,
    "announce": "Calls are recorded.",
    "announcement": "Calls are recorded.",
}


def _recording_settings(number) -> dict:
    return {
        "enabled": number.recording_enabled,
        "announce": number.recording_announce,
        "announcement": number.recording_announce or settings.RECORDING_ANNOUNCEMENT,
    }


class NumberViewSet(ResourceViewSet):
    # `/api/numbers`: the caller's numbers, their alias and their PIN.

    lookup_url_kwarg = "number_id"
    input_serializers = {
        "create": NumberCreateInput,
        "alias": AliasInput,
        "greeting": GreetingInput,
        "recording_set": RecordingInput,
        "pin": PinChangeInput,
        "blocked_add": BlockedCallerInput,
        "blocked_remove": BlockedCallerInput,
        "forwarding_set": ForwardingInput,
        "hours_set": HoursInput,
        "ringing_set": RingingInput,
        "members_invite": MemberInviteInput,
        "member_role_set": MemberRoleInput,
        "shared_notifications_set": MembershipNotificationsInput,
    }

    def number(self):
        """The caller's number named in the path; 404 for anyone else's."""
        return selectors.number_access(user=self.request.user, number_id=self.kwargs["number_id"])

    @operation(
        "numbers_list",
        summary="List your numbers",
        responses={200: (NumberListOutput, {"numbers": [NUMBER_EXAMPLE]})},
    )
    def list(self, request):
        numbers = selectors.numbers_of(user=request.user)
        return self.answer(NumberListOutput, {"numbers": numbers})

    @operation(
        "numbers_shared_list",
        summary="List the numbers shared with you",
        description="Other people's numbers you accepted an invitation to, with your `role`, "
        "your membership's `memberId` and your notices of each (`webhook`, `matrix`, "
        "`missedCallEmail`, `voicemailEmail`: `PUT /api/numbers/shared/:id`); "
        "`GET /api/numbers` lists only your own.",
        responses={200: (SharedNumberListOutput, {"numbers": [SHARED_EXAMPLE]})},
    )
    @action(detail=False, methods=["get"])
    def shared(self, request):
        rows = selectors.shared_numbers_of(user=request.user)
        return self.answer(SharedNumberListOutput, {"numbers": rows})

    @operation(
        "numbers_shared_get",
        summary="Read a number shared with you, and what you hear of its calls",
        description="Your membership of the number as `GET /api/numbers/shared` lists it. 404 "
        "for a number of your own, one not shared with you, or one you left.",
        parameters=[SHARED_NUMBER_ID_PARAMETER],
        responses={200: (SharedNumberOutput, SHARED_EXAMPLE)},
        errors=[ErrorCode.NOT_FOUND],
    )
    @action(detail=False, methods=["get"], url_path="shared/<str:number_id>")
    def shared_number(self, request, number_id):
        member = selectors.shared_number_of(user=request.user, number_id=number_id)
        return self.answer(SharedNumberOutput, member)

    @operation(
        "numbers_shared_notifications_set",
        summary="Choose what you hear of a shared number's calls",
        description=SHARED_NOTIFICATIONS_DESCRIPTION,
        parameters=[SHARED_NUMBER_ID_PARAMETER],
        request=(MembershipNotificationsInput, {"webhook": True, "missedCallEmail": True}),
        responses={
            200: (
                SharedNumberOutput,
                {**SHARED_EXAMPLE, "webhook": True, "missedCallEmail": True},
            )
        },
        errors=[ErrorCode.NOT_FOUND],
    )
    @shared_number.mapping.put
    def shared_notifications_set(self, request, number_id):
        selectors.shared_number_of(user=request.user, number_id=number_id)  # 404 before 400
        values = self.validated()
        member = services.membership_notifications_set(
            user=request.user,
            number_id=number_id,
            webhook=values.get("webhook"),
            matrix=values.get("matrix"),
            missed_call_email=values.get("missedCallEmail"),
            voicemail_email=values.get("voicemailEmail"),
        )
        return self.answer(SharedNumberOutput, member)

    def access(self):
        """The number named in the path as the caller reaches it, owner or member; 404 for
        anyone else."""
        return selectors.number_shared_access(
            user=self.request.user, number_id=self.kwargs["number_id"]
        )

    @operation(
        "numbers_members_list",
        summary="List a number's members and invitations",
        description=MEMBERS_DESCRIPTION + " An invitation past its 7 days is left out.",
        responses={200: (MemberListOutput, {"members": [MEMBER_EXAMPLE]})},
        errors=[ErrorCode.NOT_FOUND, ErrorCode.PERMISSION_DENIED],
    )
    @action(detail=True, methods=["get"])
    def members(self, request, number_id):
        access = self.access()
        services.MemberRoleRefused.unless(access.manages)
        return self.answer(
            MemberListOutput, {"members": selectors.members_of(number=access.number)}
        )

    @operation(
        "numbers_members_invite",
        summary="Invite someone to share a number",
        description=MEMBERS_DESCRIPTION
        + " Mails the address a link to `<PUBLIC_URL>/invitations/<token>`, single-use and "
        "valid 7 days; the account of that address accepts it there or with `POST "
        "/api/invitations/<token>/accept`. 400 `member_exists`, `member_is_owner` or "
        "`members_full`, and nothing is stored or mailed. Rate limited per user "
        "(`RATE_LIMIT_INVITATIONS_PER_USER`).",
        request=(MemberInviteInput, {"email": "sam@example.com", "role": "member"}),
        responses={201: (MemberOutput, MEMBER_EXAMPLE)},
        errors=[
            ErrorCode.MEMBER_EXISTS,
            ErrorCode.MEMBER_IS_OWNER,
            ErrorCode.MEMBERS_FULL,
            ErrorCode.NOT_FOUND,
            ErrorCode.PERMISSION_DENIED,
            ErrorCode.RATE_LIMITED,
        ],
    )
    @members.mapping.post
    def members_invite(self, request, number_id):
        access = self.access()  # 404 before 400
        data = self.validated()
        member = services.member_invite(
            access=access,
            email=data["email"],
            role=data["role"],
            base_url=public_base_url(request),
        )
        return self.answer(MemberOutput, member, status=status.HTTP_201_CREATED)

    def member_row(self, member_id):
        access = self.access()
        return access, selectors.member_access(access=access, member_id=member_id)

    @operation(
        "numbers_member_get",
        summary="Read a member or an invitation of a number",
        description=MEMBERS_DESCRIPTION,
        parameters=[MEMBER_ID_PARAMETER],
        responses={200: (MemberOutput, MEMBER_EXAMPLE)},
        errors=[ErrorCode.NOT_FOUND],
    )
    @action(detail=True, methods=["get"], url_path="members/<str:member_id>")
    def member(self, request, number_id, member_id):
        _access, member = self.member_row(member_id)
        return self.answer(MemberOutput, member)

    @operation(
        "numbers_member_role_set",
        summary="Change a member's role",
        description=MEMBERS_DESCRIPTION + " An invitation's role may change before it is accepted.",
        parameters=[MEMBER_ID_PARAMETER],
        request=(MemberRoleInput, {"role": "manager"}),
        responses={200: (MemberOutput, {**MEMBER_EXAMPLE, "role": "manager"})},
        errors=[ErrorCode.NOT_FOUND, ErrorCode.PERMISSION_DENIED],
    )
    @member.mapping.put
    def member_role_set(self, request, number_id, member_id):
        access, member = self.member_row(member_id)  # 404 before 400
        member = services.member_role_set(
            access=access, member=member, role=self.validated()["role"]
        )
        return self.answer(MemberOutput, member)

    @success_operation(
        "numbers_member_remove",
        summary="Remove a member, withdraw an invitation, or leave a number",
        description=MEMBERS_DESCRIPTION
        + " A withdrawn invitation's link stops working; a removed member sees nothing of the "
        "number from then on.",
        parameters=[MEMBER_ID_PARAMETER],
        errors=[ErrorCode.NOT_FOUND, ErrorCode.PERMISSION_DENIED],
    )
    @member.mapping.delete
    def member_remove(self, request, number_id, member_id):
        access, member = self.member_row(member_id)
        services.member_remove(access=access, member=member)
        return self.succeeded()

    @hashes_passwords
    @operation(
        "numbers_create",
        summary="Take a number from the inventory",
        description="Spends a CAPTCHA token (`POST /api/captcha/verify`): 400 "
        "`captcha_invalid` for one that is unknown, spent or expired. 409 "
        "`number_limit_reached` once the plan's numbers are all held, 503 "
        "`no_numbers_available` when the inventory is empty.",
        request=(
            NumberCreateInput,
            {
                "alias": "Office",
                "pin": "4821",
                "captchaToken": "3c9e7a51-0b2d-4f6e-8a1c-5d4e3f2a1b0c",
            },
        ),
        responses={201: (NumberOutput, NUMBER_EXAMPLE)},
        errors=[
            ErrorCode.CAPTCHA_INVALID,
            ErrorCode.EMAIL_UNVERIFIED,
            ErrorCode.NUMBER_LIMIT_REACHED,
            ErrorCode.NO_NUMBERS_AVAILABLE,
            ErrorCode.SERVICE_UNAVAILABLE,
        ],
    )
    def create(self, request):
        data = self.validated()
        number = services.number_create(
            user=request.user,
            alias=data["alias"],
            pin=data["pin"],
            captcha_token=data["captchaToken"],
        )
        return self.answer(NumberOutput, number, status=status.HTTP_201_CREATED)

    @success_operation(
        "numbers_delete",
        summary="Give a number back",
        description="Its call history and blocklist go with it.",
        errors=[ErrorCode.NOT_FOUND],
    )
    def destroy(self, request, number_id):
        services.number_delete(number=self.number())
        return self.succeeded()

    @operation(
        "numbers_alias_set",
        summary="Rename a number",
        request=(AliasInput, {"alias": "Office"}),
        responses={200: (NumberOutput, NUMBER_EXAMPLE)},
        errors=[ErrorCode.NOT_FOUND],
    )
    @action(detail=True, methods=["put"])
    def alias(self, request, number_id):
        number = self.number()  # 404 before 400
        number = services.number_alias_set(number=number, alias=self.validated()["alias"])
        return self.answer(NumberOutput, number)

    @operation(
        "numbers_greeting_set",
        summary="Set what voicemail says to a number's callers",
        description="0 to 500 characters; an empty greeting restores the service's default, "
        "which never reads the alias out.",
        request=(GreetingInput, {"greeting": "You have reached the shop. Leave a message."}),
        responses={200: (NumberOutput, NUMBER_EXAMPLE)},
        errors=[ErrorCode.NOT_FOUND, ErrorCode.PERMISSION_DENIED],
    )
    @action(detail=True, methods=["put"])
    def greeting(self, request, number_id):
        number = self.managed_number()  # 404 and 403 before 400
        number = services.number_greeting_set(number=number, greeting=self.validated()["greeting"])
        return self.answer(NumberOutput, number)

    @operation(
        "numbers_greeting_get",
        summary="Read which greeting a number's callers hear",
        description="`recorded` when the owner recorded one by phone (the mailbox's 3: "
        "docs/telephony.md, The mailbox), played in place of the text; else `text` when "
        "`greeting` is set, else `default`.",
        responses={200: (GreetingOutput, GREETING_EXAMPLE)},
        errors=[ErrorCode.NOT_FOUND, ErrorCode.PERMISSION_DENIED],
    )
    @greeting.mapping.get
    def greeting_get(self, request, number_id):
        return self.answer(GreetingOutput, selectors.Greeting.of(self.managed_number()))

    @wav_download_operation(
        "numbers_greeting_recording_get",
        summary="Download a number's recorded greeting",
        description="The greeting recorded by phone as WAV (16-bit PCM, 8 kHz, mono); 404 "
        "when the number is neither yours nor one you manage, or has no recorded greeting.",
        errors=[ErrorCode.PERMISSION_DENIED],
    )
    @action(
        detail=True,
        methods=["get"],
        url_path="greeting/recording",
        content_negotiation_class=JsonErrorsOnly,
    )
    def greeting_recording(self, request, number_id):
        return greeting_download(request, self.managed_number())

    @success_operation(
        "numbers_greeting_recording_delete",
        summary="Remove a number's recorded greeting",
        description="Callers hear the text greeting again (or the default); the recording is "
        "deleted. 404 when the number is neither yours nor one you manage, or has no "
        "recorded greeting.",
        errors=[ErrorCode.NOT_FOUND, ErrorCode.PERMISSION_DENIED],
    )
    @greeting_recording.mapping.delete
    def greeting_recording_delete(self, request, number_id):
        services.number_greeting_recording_remove(number=self.managed_number())
        return self.succeeded()

    @operation(
        "numbers_recording_get",
        summary="Read whether a number's forwarded calls are recorded",
        description="`enabled` (off by default), the owner's `announce` text (empty: the "
        "default) and the `announcement` both parties hear before a recorded bridge.",
        responses={200: (RecordingOutput, RECORDING_EXAMPLE)},
        errors=[ErrorCode.NOT_FOUND],
    )
    @action(detail=True, methods=["get"])
    def recording(self, request, number_id):
        return self.answer(RecordingOutput, _recording_settings(self.number()))

    @operation(
        "numbers_recording_set",
        summary="Record a number's forwarded calls, or stop",
        description="When `enabled`, both parties of each forwarded call hear the "
        'announcement (`announce`, 0 to 500 characters; empty or left out: "This call may '
        'be recorded.") before the bridge, which is recorded in one WAV, the caller on the '
        "left channel and the other party on the right (docs/telephony.md, Recording). "
        "Replaces what was set. 404 when the number is not yours.",
        request=(RecordingInput, {"enabled": True, "announce": "Calls are recorded."}),
        responses={200: (RecordingOutput, RECORDING_EXAMPLE)},
        errors=[ErrorCode.NOT_FOUND],
    )
    @recording.mapping.put
    def recording_set(self, request, number_id):
        number = self.number()  # 404 before 400
        data = self.validated()
        number = services.number_recording_set(
            number=number, enabled=data["enabled"], announce=data["announce"]
        )
        return self.answer(RecordingOutput, _recording_settings(number))

    @hashes_passwords
    @success_operation(
        "numbers_pin_change",
        summary="Change a number's PIN",
        description="403 `pin_mismatch` for a wrong current PIN; after five within 15 "
        "minutes, 429 `pin_locked` with `Retry-After` until the window ends.",
        request=(PinChangeInput, {"currentPin": "4821", "newPin": "739155"}),
        errors=[
            ErrorCode.PIN_MISMATCH,
            ErrorCode.NOT_FOUND,
            ErrorCode.PIN_LOCKED,
            ErrorCode.SERVICE_UNAVAILABLE,
        ],
    )
    @action(detail=True, methods=["put"])
    def pin(self, request, number_id):
        number = self.number()  # 404 before 400
        data = self.validated()
        services.number_pin_change(
            number=number,
            current_pin=data["currentPin"],
            new_pin=data["newPin"],
        )
        return self.succeeded()

    @operation(
        "numbers_blocked_list",
        summary="List the callers a number blocks",
        responses={200: (BlocklistOutput, {"blocked": [BLOCKED_EXAMPLE]})},
        errors=[ErrorCode.NOT_FOUND],
    )
    @action(detail=True, methods=["get"])
    def blocked(self, request, number_id):
        entries = selectors.blocklist_of(number=self.number())
        return self.answer(BlocklistOutput, {"blocked": entries})

    @operation(
        "numbers_blocked_add",
        summary="Block a caller",
        description="201 when added, 200 when the caller was already blocked. Their calls "
        "are refused (recorded `blocked`). 400 `blocklist_full` past 500 callers.",
        request=(BlockedCallerInput, CALLER_EXAMPLE),
        responses={
            200: (BlockedCallerOutput, BLOCKED_EXAMPLE),
            201: (BlockedCallerOutput, BLOCKED_EXAMPLE),
        },
        errors=[ErrorCode.BLOCKLIST_FULL, ErrorCode.NOT_FOUND],
    )
    @blocked.mapping.post
    def blocked_add(self, request, number_id):
        number = self.number()  # 404 before 400
        entry, created = services.blocked_caller_add(
            number=number, caller_num=self.validated()["caller_num"]
        )
        return self.answer(
            BlockedCallerOutput,
            entry,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    @success_operation(
        "numbers_blocked_remove",
        summary="Unblock a caller",
        description="The caller goes in the JSON body, as for blocking. 404 when the number "
        "is not yours or does not block that caller.",
        request=(BlockedCallerInput, CALLER_EXAMPLE),
        errors=[ErrorCode.NOT_FOUND],
    )
    @blocked.mapping.delete
    def blocked_remove(self, request, number_id):
        number = self.number()  # 404 before 400
        services.blocked_caller_remove(number=number, caller_num=self.validated()["caller_num"])
        return self.succeeded()

    @operation(
        "numbers_forwarding_get",
        summary="Read where a number forwards its calls",
        description=FORWARDING_DESCRIPTION + " `targets` is empty while forwarding is off. "
        "This is the number's ring list (`/ringing`) seen as forwarding: its phones, and "
        '"browser" for your own member entry; its SIP and other members\' entries are not '
        "shown here.",
        responses={200: (ForwardingOutput, FORWARDING_EXAMPLE)},
        errors=[ErrorCode.NOT_FOUND],
    )
    @action(detail=True, methods=["get"])
    def forwarding(self, request, number_id):
        return self.answer(ForwardingOutput, services.Forwarding.of(self.number()))

    @operation(
        "numbers_forwarding_set",
        summary="Forward a number's calls to your phones",
        description=FORWARDING_DESCRIPTION
        + " Replaces what was set (the whole ring list, `/ringing`: each target an entry, "
        '`all` at once, "browser" your own member entry); fields left out take their '
        "defaults. A target is refused "
        "with `destination_not_allowed` when it is one of this service's numbers (a loop) or "
        "the dialing policy refuses it (other countries, premium-rate and similar numbers), "
        "and nothing is stored. Forwarded calls count towards your plan's call quotas. "
        "Rate limited per user (`RATE_LIMIT_FORWARDING_PER_USER`).",
        request=(ForwardingInput, FORWARDING_EXAMPLE),
        responses={200: (ForwardingOutput, FORWARDING_EXAMPLE)},
        errors=[ErrorCode.DESTINATION_NOT_ALLOWED, ErrorCode.NOT_FOUND, ErrorCode.RATE_LIMITED],
    )
    @forwarding.mapping.put
    def forwarding_set(self, request, number_id):
        number = self.number()  # 404 before 400
        forwarding = services.number_forwarding_set(
            number=number, forwarding=services.Forwarding.from_input(self.validated())
        )
        return self.answer(ForwardingOutput, forwarding)

    @operation(
        "numbers_forwarding_clear",
        summary="Stop forwarding a number's calls",
        description="Its calls go to voicemail again; the settings go back to their defaults.",
        responses={204: (None, None)},
        errors=[ErrorCode.NOT_FOUND],
    )
    @forwarding.mapping.delete
    def forwarding_clear(self, request, number_id):
        services.number_forwarding_clear(number=self.number())
        return Response(status=status.HTTP_204_NO_CONTENT)

    def managed_number(self):
        """The number named in the path, for those who may change how it takes calls (its
        ring list, hours and greetings): its owner or a manager; 403 for a member, 404 for
        anyone else."""
        access = self.access()
        services.MemberRoleRefused.unless(access.manages)
        return access.number

    @operation(
        "numbers_ringing_get",
        summary="Read who a number's calls ring",
        description=RINGING_DESCRIPTION + " `entries` is empty while nobody is rung.",
        responses={200: (RingingOutput, RINGING_EXAMPLE)},
        errors=[ErrorCode.NOT_FOUND, ErrorCode.PERMISSION_DENIED],
    )
    @action(detail=True, methods=["get"])
    def ringing(self, request, number_id):
        number = self.managed_number()
        return self.answer(RingingOutput, services.RingList.of(number))

    @operation(
        "numbers_ringing_set",
        summary="Set who a number's calls ring (its ring group)",
        description=RINGING_DESCRIPTION + " Replaces what was set; fields left out take their "
        "defaults. A refused entry is named by its index in `fields` (`entries.N`, "
        "`entries.N.phone`, `.sip` or `.member`; docs/errors.md, Ring lists) and nothing is "
        "stored: a phone the dialing policy refuses (`destination_not_allowed`), a SIP URI "
        "that is not sip:/sips: or leads to a private or local address, a member who is not "
        "the owner nor an active member, an entry named twice, more than 10 entries "
        "(`invalid_request`). Rate limited per user (`RATE_LIMIT_FORWARDING_PER_USER`, "
        "counted apart from forwarding).",
        request=(RingingInput, RINGING_EXAMPLE),
        responses={200: (RingingOutput, RINGING_EXAMPLE)},
        errors=[
            ErrorCode.DESTINATION_NOT_ALLOWED,
            ErrorCode.NOT_FOUND,
            ErrorCode.PERMISSION_DENIED,
            ErrorCode.RATE_LIMITED,
        ],
    )
    @ringing.mapping.put
    def ringing_set(self, request, number_id):
        number = self.managed_number()  # 404 and 403 before 400
        ring_list = services.number_ringing_set(
            number=number,
            user=request.user,
            ring_list=services.RingList.from_input(self.validated()),
        )
        return self.answer(RingingOutput, ring_list)

    @operation(
        "numbers_ringing_clear",
        summary="Ring nobody on a number's calls",
        description="Its calls go to voicemail; the settings go back to their defaults "
        "(forwarding is off too: it is the same list).",
        responses={204: (None, None)},
        errors=[ErrorCode.NOT_FOUND, ErrorCode.PERMISSION_DENIED],
    )
    @ringing.mapping.delete
    def ringing_clear(self, request, number_id):
        services.number_ringing_clear(number=self.managed_number())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @operation(
        "numbers_hours_get",
        summary="Read a number's opening hours",
        description=HOURS_DESCRIPTION + " `timeZone` is null while none are set; `openNow` "
        "says whether the number takes calls at this moment.",
        responses={200: (HoursOutput, {**HOURS_ANSWER_EXAMPLE, "openNow": True})},
        errors=[ErrorCode.NOT_FOUND, ErrorCode.PERMISSION_DENIED],
    )
    @action(detail=True, methods=["get"])
    def hours(self, request, number_id):
        row = selectors.hours_of(number=self.managed_number())
        return self.answer(HoursOutput, selectors.HoursSettings.of(row, at=timezone.now()))

    @operation(
        "numbers_hours_set",
        summary="Set a number's opening hours and do-not-disturb",
        description=HOURS_DESCRIPTION + " Replaces what was set; fields left out take their "
        "defaults. 400 `invalid_request`, nothing stored, for windows that overlap on a day, "
        "end at or before they start, an unknown time zone or day, a time that is not HH:MM, "
        "a date given twice or not YYYY-MM-DD, more than 50 windows or 366 dates. Rate "
        "limited per user (`RATE_LIMIT_FORWARDING_PER_USER`, counted apart from forwarding).",
        request=(HoursInput, HOURS_EXAMPLE),
        responses={200: (HoursOutput, {**HOURS_ANSWER_EXAMPLE, "openNow": False})},
        errors=[ErrorCode.NOT_FOUND, ErrorCode.PERMISSION_DENIED, ErrorCode.RATE_LIMITED],
    )
    @hours.mapping.put
    def hours_set(self, request, number_id):
        number = self.managed_number()  # 404 and 403 before 400
        row = services.number_hours_set(number=number, data=self.validated())
        return self.answer(HoursOutput, selectors.HoursSettings.of(row, at=timezone.now()))

    @operation(
        "numbers_hours_clear",
        summary="Remove a number's opening hours",
        description="The number takes calls at all times again, and do-not-disturb is off.",
        responses={204: (None, None)},
        errors=[ErrorCode.NOT_FOUND, ErrorCode.PERMISSION_DENIED],
    )
    @hours.mapping.delete
    def hours_clear(self, request, number_id):
        services.number_hours_clear(number=self.managed_number())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @wav_download_operation(
        "numbers_closed_greeting_get",
        summary="Download a number's recorded closed greeting",
        description="The closed greeting recorded by phone (the mailbox's 4) as WAV (16-bit "
        "PCM, 8 kHz, mono); 404 when the number is neither yours nor one you manage, or has "
        "none.",
        errors=[ErrorCode.PERMISSION_DENIED],
    )
    @action(
        detail=True,
        methods=["get"],
        url_path="hours/closed-greeting",
        content_negotiation_class=JsonErrorsOnly,
    )
    def closed_greeting(self, request, number_id):
        return greeting_download(request, self.managed_number(), closed=True)

    @success_operation(
        "numbers_closed_greeting_delete",
        summary="Remove a number's recorded closed greeting",
        description="While closed, callers hear the spoken `closedGreeting` again (or the "
        "usual greeting); the recording is deleted. 404 when the number is neither yours nor "
        "one you manage, or has none.",
        errors=[ErrorCode.NOT_FOUND, ErrorCode.PERMISSION_DENIED],
    )
    @closed_greeting.mapping.delete
    def closed_greeting_delete(self, request, number_id):
        services.number_greeting_recording_remove(number=self.managed_number(), closed=True)
        return self.succeeded()

    @wav_download_operation(
        "numbers_hold_music_get",
        summary="Download a number's music on hold",
        description="The music uploaded with PUT as the number's forwarded calls play it: WAV "
        "(16-bit PCM, 8 kHz, mono). For the number's owner and managers: 403 for a member; "
        "404 when the number is neither yours nor one you manage, or has none (its calls "
        "play Relay's own).",
        errors=[ErrorCode.PERMISSION_DENIED],
    )
    @action(
        detail=True,
        methods=["get"],
        url_path="hold-music",
        content_negotiation_class=JsonErrorsOnly,
    )
    def hold_music(self, request, number_id):
        return hold_music_download(request, self.managed_number())

    @extend_schema(request={"audio/wav": OpenApiTypes.BINARY})
    @operation(
        "numbers_hold_music_set",
        summary="Upload a number's music on hold",
        description="The body is a WAV file (`Content-Type: audio/wav`; any rate, sample "
        "width and channels sox reads), played in place of Relay's own music on hold to the "
        "party of the number's forwarded call whose other end holds (docs/telephony.md, "
        "Music on hold). It is stored converted to 8 kHz, 16-bit, mono, and replaces what was "
        "uploaded before. The number's owner and managers set it: 403 for a member, 404 for "
        "anyone else. 415 `unsupported_media_type` for another content type; 413 "
        "`payload_too_large` past HOLD_MUSIC_MAX_BYTES; 400 `invalid_request` (the field "
        "`file`) for a body that is not a WAV file sox can read, holds no audio or is longer "
        "than HOLD_MUSIC_MAX_SECONDS. Rate limited per user (`RATE_LIMIT_FORWARDING_PER_USER`, "
        "counted apart).",
        responses={
            200: (
                HoldMusicOutput,
                {
                    "url": "/api/numbers/7c1d2e3f-4a5b-4c6d-9e8f-0a1b2c3d4e5f/hold-music",
                    "seconds": 42.5,
                },
            )
        },
        errors=[
            ErrorCode.NOT_FOUND,
            ErrorCode.PERMISSION_DENIED,
            ErrorCode.INVALID_REQUEST,
            ErrorCode.UNSUPPORTED_MEDIA_TYPE,
            ErrorCode.RATE_LIMITED,
        ],
    )
    @hold_music.mapping.put
    def hold_music_set(self, request, number_id):
        number = self.managed_number()  # 404 and 403 before 415, 400
        if request.content_type.split(";")[0].strip().lower() not in WAV_MEDIA_TYPES:
            raise ApplicationError(
                "Send the music as a WAV file (Content-Type: audio/wav).",
                code=ErrorCode.UNSUPPORTED_MEDIA_TYPE,
            )
        # The middleware refused a larger declared body; this caps what is read all the same.
        limit = settings.HOLD_MUSIC_MAX_BYTES
        stream = request.stream
        wav = stream.read(limit + 1) if stream is not None else b""
        if len(wav) > limit:
            raise ApplicationError(
                f"The request body is larger than {limit} bytes.",
                code=ErrorCode.PAYLOAD_TOO_LARGE,
            )
        number = services.number_hold_music_set(number=number, wav=wav)
        return self.answer(HoldMusicOutput, selectors.HoldMusic.of(number))

    @success_operation(
        "numbers_hold_music_delete",
        summary="Remove a number's music on hold",
        description="Its forwarded calls play Relay's own music on hold again; the uploaded "
        "file is deleted. 403 for a member; 404 when the number is neither yours nor one you "
        "manage, or has none.",
        errors=[ErrorCode.NOT_FOUND, ErrorCode.PERMISSION_DENIED],
    )
    @hold_music.mapping.delete
    def hold_music_delete(self, request, number_id):
        services.number_hold_music_remove(number=self.managed_number())
        return self.succeeded()


class InvitationViewSet(ResourceViewSet):
    # `/api/invitations/<token>`: an invitation to share a number, accepted by its addressee.

    lookup_url_kwarg = "token"  # the access log writes a path argument so named as [token]
    lookup_schema = {"type": "string", "minLength": 1, "maxLength": 200}

    @operation(
        "invitations_accept",
        summary="Accept an invitation to share a number",
        description="The token is the last part of the mailed link (`/invitations/<token>`). "
        "The signed-in account's address must be the invited one (compared "
        "case-insensitively): 403 `invitation_email_mismatch` otherwise. 400 "
        "`invitation_invalid` for a link used, older than 7 days or withdrawn. Answers the "
        "number as `GET /api/numbers/shared` lists it.",
        responses={200: (SharedNumberOutput, SHARED_EXAMPLE)},
        errors=[
            ErrorCode.INVITATION_INVALID,
            ErrorCode.INVITATION_EMAIL_MISMATCH,
            ErrorCode.MEMBER_EXISTS,
            ErrorCode.MEMBER_IS_OWNER,
        ],
    )
    @action(detail=True, methods=["post"])
    def accept(self, request, token):
        member = services.invitation_accept(user=request.user, token=token)
        return self.answer(SharedNumberOutput, member)
