"""`manage.py createuser --email … --password-stdin`: staff create an account, the way to add
users while sign-up is closed (REGISTRATION_OPEN=false). The password is read from standard
input, never from the command line, where `ps` and shell history would show it: piped in
(`vault read ... | manage.py createuser ...`), or typed at a prompt that does not echo it
when standard input is a terminal."""

import getpass
import sys

from django.core.management.base import BaseCommand, CommandError

from accounts import services
from accounts.models import FREE_PLAN
from core.errors import ApplicationError


class Command(BaseCommand):
    help = "Create a user (with an API key), its password read from standard input."

    def add_arguments(self, parser):
        parser.add_argument("--email", required=True, help="the new user's e-mail address")
        parser.add_argument(
            "--password-stdin",
            action="store_true",
            required=True,
            help="read the password from the first line of standard input (on a terminal: "
            "a prompt that does not echo it)",
        )
        parser.add_argument("--plan", default=FREE_PLAN, help="a plan of PLANS (default: free)")

    def handle(self, *args, email, password_stdin, plan, **options):
        if sys.stdin.isatty():
            password = getpass.getpass("Password: ")
        else:
            password = sys.stdin.readline().rstrip("\r\n")
        if not password:
            raise CommandError("no password on standard input")
        try:
            user = services.user_create(email=email, password=password, plan=plan)
        except ApplicationError as refused:
            raise CommandError(refused.message) from None
        self.stdout.write(f"Created {user.email} (plan {user.plan}).")
